"""`runner state ...`: commands on the state itself rather than on a job (``copy``)."""

from __future__ import annotations

import click

from runner.cli.options import StateParam, reports_errors
from runner.state.locations import StateLocation


@click.group()
def state() -> None:
    """Commands on the state database itself.

    \b
    Example:
      runner state copy state/runner.sqlite postgresql://runner@db.internal:5432/payroll
    """


@state.command()
@click.argument("source", type=StateParam())
@click.argument("target", type=StateParam())
@reports_errors
def copy(source: StateLocation, target: StateLocation) -> None:
    """Copy the whole state at SOURCE into TARGET: a SQLite file into a PostgreSQL
    database (password from PGPASSWORD or ~/.pgpass), or back.

    Refused (nothing written) when TARGET already holds a state, or while a run is live on
    SOURCE (exit 75). The rows go in one transaction.

    \b
    Example:
      runner state copy state/runner.sqlite postgresql://runner@db.internal:5432/payroll
    """
    from runner.state.copying import copy_state

    counts = copy_state(source, target)
    click.echo(f"copied {counts['items']} items, {counts['runs']} runs and "
               f"{counts['attempts']} calls from {source} to {target}")
