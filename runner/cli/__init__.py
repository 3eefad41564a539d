"""The command line: thin commands over the library.

Each command parses its options, calls the library and formats the result; library errors
become messages and exit codes here and nowhere else (``options.reports_errors``); what each
code means is ``runner.exit_codes``'s. ``HELP`` below is what `runner --help` shows. The
commands: ``run`` (validate, run, confirm), ``plan`` (plan, apply), ``approvals`` (show,
approve), ``batch`` (status, report, resolve, reconcile), ``sandbox``, ``schema``.
"""

from __future__ import annotations

import atexit
import gc

import click

from runner import __version__
from runner.cli.approvals import approve, show
from runner.cli.batch import reconcile, report, resolve, status
from runner.cli.console import console
from runner.cli.init import init
from runner.cli.manual import man
from runner.cli.options import quiet_stdout
from runner.cli.plan import apply, plan
from runner.cli.run import confirm, log_to_stderr, run, validate
from runner.cli.sandbox import sandbox
from runner.cli.schema import schema
from runner.cli.state import state
from runner.credentials import HELD
from runner.exit_codes import help_lines

HELP = """Pay many people at once from a YAML job file, exactly once.

Validates every item against the provider's rules, then quotes, creates and confirms each
payment, keeping its progress so that a run killed at any moment resumes without paying
anyone twice. `base_url: sandbox` runs against the embedded provider sandbox.

\b
Example:
  runner validate jobs/payroll.yaml
  runner run jobs/payroll.yaml
  runner plan jobs/payroll.yaml -o payroll.plan.json --sign ~/.ssh/id_ed25519
  runner approve payroll.plan.json --sign ~/.ssh/id_ed25519   (another person)
  runner apply payroll.plan.json

\b
Exit codes:
""" + "\n".join(help_lines()) + """

\b
Shell completion (commands, options, file names), added to the shell's start-up file:
  bash  eval "$(_RUNNER_COMPLETE=bash_source runner)"      in ~/.bashrc
  zsh   eval "$(_RUNNER_COMPLETE=zsh_source runner)"       in ~/.zshrc
  fish  _RUNNER_COMPLETE=fish_source runner > ~/.config/fish/completions/runner.fish
The manual page: runner man | man -l -   (every command's help: docs/commands.md)
"""

@click.group(help=HELP)
@click.version_option(__version__, prog_name="runner")
@click.pass_context
def main(ctx: click.Context) -> None:
    HELD.clear()  # the credentials this command reads (its job's ...) are the ones it masks
    quiet_stdout(ctx)  # a pipe closed early (`| head`) ends the output, not the command
    log_to_stderr()  # warnings, with their UTC time (run, apply, confirm: -q, -v)


for command in (validate, plan, show, approve, run, apply, confirm, status, report, resolve,
                reconcile, console, sandbox, schema, state, init, man):
    main.add_command(command)


def entry() -> None:
    """The ``runner`` command, and ``python -m runner``: ``main`` in a process of its own,
    whose objects the collector is told to leave be (``gc.freeze``; a program that calls
    ``main`` itself keeps its collector as it is):

    - what the imports made (modules, classes, models) lives as long as the process: frozen
      first, each later collection walks only what the command makes (about 0.1 s less of a
      run's start and plan);
    - the interpreter's last act is a collection of every object left; after a large batch
      that is a fifth of a second, spent finding nothing to close (the state, the reports and
      the logs are closed by then, each by its own block): frozen as the process exits, it
      is skipped."""
    gc.freeze()
    atexit.register(gc.freeze)
    main()
