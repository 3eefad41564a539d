"""``runner init DIR``: a folder started with the example jobs and templates of the
installed package (``runner.starter``)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from runner.cli.options import reports_errors
from runner.exit_codes import ExitCode


@click.command()
@click.argument("folder", metavar="DIR", type=click.Path(file_okay=False, path_type=Path))
@reports_errors
def init(folder: Path) -> None:
    """Start DIR with an example job of every kind, its rows, and the summary templates.

    Writes DIR/jobs/ (payroll.yaml and payroll.csv, and one example per kind) and
    DIR/templates/; each runs as it is against the embedded sandbox. Nothing is overwritten:
    when any of those files exists, nothing is written (exit 2).

    \b
    Example:
      runner init payroll && cd payroll && runner run jobs/payroll.yaml
    """
    from runner.starter import STARTER, existing, start

    there = existing(folder)
    if there:
        click.echo(f"error: {len(there)} file(s) already there, nothing was written: "
                   + ", ".join(str(p) for p in there[:5]) + (" ..." if len(there) > 5 else ""),
                   err=True)
        sys.exit(ExitCode.USAGE)
    written = start(folder)
    click.echo(f"{len(written)} files written under {folder}; try: cd {folder} && "
               f"runner run {STARTER}")
