"""The command line: thin commands over the library.

Each command parses its options, calls the library and formats the result; library errors
become messages and exit codes here and nowhere else.

\b
Exit codes:
  0   every item settled well
  1   some items failed, were refused or are unknown
  2   usage error or invalid job file (nothing was sent)
  75  another run holds the job's lease, or the provider is unreachable (try later)
"""

from __future__ import annotations

import click

from runner import __version__
from runner.job.cli import schema
from runner.sandbox.cli import sandbox


@click.group(help=__doc__)
@click.version_option(__version__, prog_name="runner")
def main() -> None:
    pass


main.add_command(sandbox)
main.add_command(schema)
