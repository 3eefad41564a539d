"""``runner schema``: the JSON Schema of job files, for editors (thin over the job model)."""

from __future__ import annotations

import json

import click

from runner.job.schema import item_schema, job_schema
from runner.kinds import MODULES


@click.command()
@click.option("--kind", type=click.Choice(MODULES), help="Print the schema of one kind's item.")
def schema(kind: str | None) -> None:
    """Print the JSON Schema of a job file, or of one kind's item.

    Editors that read JSON Schema (VS Code with the YAML extension, for one) then complete
    and check job files as they are typed. Every value may be a ${VAR} or ${VAR:-default}
    reference to the environment. Item fields may hold Jinja text, so the job schema
    leaves `defaults` and `items.template` open; `--kind` gives their fields.

    \b
    Examples:
      runner schema > job.schema.json
      runner schema --kind remittance
    """
    document = job_schema() if kind is None else item_schema(kind)
    click.echo(json.dumps(document, indent=2, sort_keys=False))
