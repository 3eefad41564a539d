"""The command line: thin commands over the library.

Each command parses its options, calls the library and formats the result; library errors
become messages and exit codes here and nowhere else (``options.reports_errors``). ``HELP``
below is what `runner --help` shows. The commands: ``run`` (validate, run, confirm), ``plan``
(plan, apply), ``approvals`` (show, approve), ``batch`` (status, report, resolve, reconcile),
``sandbox``, ``schema``.
"""

from __future__ import annotations

import click

from runner import __version__
from runner.cli.approvals import approve, show
from runner.cli.batch import reconcile, report, resolve, status
from runner.cli.init import init
from runner.cli.manual import man
from runner.cli.options import quiet_stdout
from runner.cli.plan import apply, plan
from runner.cli.run import confirm, log_to_stderr, run, validate
from runner.cli.sandbox import sandbox
from runner.cli.schema import schema
from runner.cli.state import state

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
  0   every item settled well
  1   some items failed, were refused or are unknown; a row changed after its
      item was paid or sent (left unpaid); or "no" to the question before money
      moves (nothing was sent or written)
  2   usage error or invalid job file (nothing was sent); a plan refused by apply,
      or run and confirm refused under run.four_eyes; a key that cannot sign, or a
      plan approve refuses; status, report or reconcile named a state database that
      does not exist
  3   items handled, but the summary email could not be sent (or the summary not
      made); the summary is under the state folder's reports/ (a worse code wins)
  4   the balances cannot cover what is to be paid: nothing was paid (run, apply,
      confirm; plan and run --dry-run: a run would stop so; status: the latest
      run stopped so)
  5   status: no item failed, but some are still pending or awaiting confirmation
  70  internal error: a bug in runner (what is recorded is safe; --debug shows where)
  74  the state database cannot be used: read-only, no permission, damaged, written
      by a newer runner, a table missing (a person must look); or a file to write
      (plan -o, report --output) cannot be: a full disk, a link or a device there
  75  another run holds the job's lease, the provider is unreachable, or the state
      database stays locked or its disk is full (try later)
  78  configuration: the provider refuses the credentials (401/403), or its TLS
      certificate is not trusted (SSL_CERT_FILE, REQUESTS_CA_BUNDLE); retrying
      changes nothing until it is fixed
  130 stopped by Ctrl-C (SIGINT), 143 by SIGTERM: the calls in flight finished and
      were recorded, the summary was written; run again to resume

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
    quiet_stdout(ctx)  # a pipe closed early (`| head`) ends the output, not the command
    log_to_stderr()  # warnings, with their UTC time (run, apply, confirm: -q, -v)


for command in (validate, plan, show, approve, run, apply, confirm, status, report, resolve,
                reconcile, sandbox, schema, state, init, man):
    main.add_command(command)
