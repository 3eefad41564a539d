"""``runner show``: a plan file as its approver reads it, from the file itself (the people it
pays, the amounts, the totals, who planned and who signed)."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import simplejson

from runner.cli.options import reports_errors


@click.command()
@click.argument("plan_file", metavar="PLAN", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "json", "csv"]), default="text",
              show_default=True, help="csv: one line per item to pay.")
@reports_errors
def show(plan_file: Path, fmt: str) -> None:
    """List what the plan file PLAN pays, from the file itself (nothing is made again).

    Each item to pay: its row, external_id, beneficiary, payer, account (masked to its last
    four), the amount sent, the fee and the rate, and what the beneficiary receives; then
    the totals per currency, the items the plan does not pay and why, the balances when it
    was made, who planned it and its signatures. Reads the file only; sends nothing. Exits
    2 when PLAN is not a whole plan file.

    \b
    Example:
      runner show payroll.plan.json --format csv > payroll-plan.csv
    """
    from runner.engine.plan_file import read_plan
    from runner.engine.plan_listing import Listing, as_csv, as_json, lines
    from runner.errors import PlanRefused

    try:
        content, digest = read_plan(plan_file)
    except PlanRefused as refused:
        click.echo(f"error: {'; '.join(refused.reasons)}", err=True)
        sys.exit(refused.exit_code)
    listing = Listing(content, digest)
    if fmt == "json":
        click.echo(simplejson.dumps(as_json(listing), indent=2))
    elif fmt == "csv":
        click.echo(as_csv(listing), nl=False)
    else:
        for line in lines(listing):
            click.echo(line)
