"""``runner show`` and ``runner approve``: a plan file as its approver reads it, from the file
itself (the people it pays, the amounts, the totals, who planned and who signed), and the
approver's signature added to it."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from runner.cli.options import reports_errors, states
from runner.exit_codes import ExitCode, exits
from runner.money import json_text

if TYPE_CHECKING:
    from runner.engine.plan_listing import Listing

PASSPHRASE = "RUNNER_KEY_PASSPHRASE"
JOB_OPTION = click.option(
    "--job", type=click.Path(dir_okay=False, path_type=Path),
    help="The plan's job file, where it is not at the path the plan names (the same bytes: "
         "its run.approvers say whose keys count).")


def passphrase_for(key: Path) -> Callable[[], str | None]:
    """Where the passphrase of a protected key comes from, asked only when the key needs
    one: $RUNNER_KEY_PASSPHRASE, else the terminal (never echoed, never kept)."""
    def ask() -> str | None:
        if os.environ.get(PASSPHRASE):
            return os.environ[PASSPHRASE]
        if sys.stdin.isatty():
            return str(click.prompt(f"Passphrase for {key}", hide_input=True, err=True))
        return None

    return ask


@click.command()
@click.argument("plan_file", metavar="PLAN", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "json", "csv"]), default="text",
              show_default=True, help="csv: one line per item to pay.")
@JOB_OPTION
@reports_errors
@states(exits((ExitCode.OK, "it is listed"),
              (ExitCode.USAGE, "PLAN is not a whole plan file")))
def show(plan_file: Path, fmt: str, job: Path | None) -> None:
    """List what the plan file PLAN pays, from the file itself (nothing is made again).

    Each item to pay: its row, external_id, beneficiary, payer, account (masked to its last
    four), the amount sent, the fee and the rate, and what the beneficiary receives; then
    the totals per currency, the items the plan does not pay and why, the balances when it
    was made, who planned it, and each signature: who signed (the principal run.approvers
    names for its key), the key, when, and whether it holds. Reads files only; sends
    nothing. EXITS

    \b
    Example:
      runner show payroll.plan.json --format csv > payroll-plan.csv
    """
    from runner.engine.plan_file import read_plan
    from runner.engine.plan_listing import Listing, as_csv, as_json, lines
    from runner.engine.plan_signing import signature_views
    from runner.errors import PlanRefused

    try:
        content, digest = read_plan(plan_file)
    except PlanRefused as refused:
        click.echo(f"error: {'; '.join(refused.reasons)}", err=True)
        sys.exit(refused.exit_code)
    views, approvals = signature_views(content, digest, job, datetime.now(UTC))
    listing = Listing(content, digest, views, approvals)
    if fmt == "json":
        click.echo(json_text(as_json(listing)))
    elif fmt == "csv":
        click.echo(as_csv(listing), nl=False)
    else:
        for line in lines(listing):
            click.echo(line)


@click.command()
@click.argument("plan_file", metavar="PLAN", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--sign", type=click.Path(dir_okay=False, path_type=Path), metavar="KEY",
              required=True, help="Your SSH private key (one of run.approvers; a passphrase "
                                  "from $RUNNER_KEY_PASSPHRASE or asked).")
@click.option("--yes", is_flag=True, help="Do not show the plan and ask first.")
@click.option("--as-planner", is_flag=True,
              help="Sign as the plan's planner a plan the executor made unsigned (`runner "
                   "plan JOB -o PLAN` where the provider's credentials are), before the "
                   "approvers approve it.")
@JOB_OPTION
@reports_errors
@states(exits((ExitCode.OK, "the signature is added"),
              (ExitCode.USAGE, "it is refused or the key cannot sign"),
              (ExitCode.STATE_UNUSABLE, "the plan file cannot be written")))
def approve(plan_file: Path, sign: Path, yes: bool, as_planner: bool, job: Path | None
            ) -> None:
    """Approve the plan file PLAN: add your signature to it (four eyes).

    On a terminal it lists the plan first, as `runner show` does, and asks. Refused (exit
    2, the file left as it is) when your key is not one of the approvers (run.approvers,
    and the executor's policy's, read from the copy RUNNER_POLICY names, where the plan
    names a policy account), signed the plan already (a planner does not approve his own
    plan), when the plan's signatures do not hold (it was edited since it was signed), or
    when it expired. Once enough keys approved it, `runner apply PLAN` pays it (from cron
    too). With --as-planner, the planner's signature of a plan made unsigned. Needs no
    provider credentials; sends nothing. EXITS

    \b
    Example:
      runner approve payroll.plan.json --sign ~/.ssh/id_ed25519
      runner approve payroll.plan.json --sign ~/.ssh/id_ed25519 --as-planner
    """
    from runner.engine.plan_signing import APPROVE, PLAN, approve_plan
    from runner.errors import PlanRefused

    ask = None if yes or not (sys.stdin.isatty() and sys.stderr.isatty()) else _ask
    try:
        signed, stands = approve_plan(plan_file, sign, passphrase_for(sign), job,
                                      datetime.now(UTC), ask, PLAN if as_planner else APPROVE)
    except PlanRefused as refused:
        click.echo(f"not {'signed' if as_planner else 'approved'}: "
                   f"{'; '.join(refused.reasons)}", err=True)
        sys.exit(refused.exit_code)
    done = "signed as its planner" if as_planner else "approved"
    click.echo(f"{done} by {signed.principal} ({signed.key}): {stands}; `runner apply "
               f"{plan_file}` pays it once enough keys approved it")


def _ask(listing: Listing) -> bool:
    from runner.engine.plan_listing import lines

    for line in lines(listing):
        click.echo(line, err=True)
    return click.confirm("Approve this plan?", default=False, err=True)
