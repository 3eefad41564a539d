"""``runner schema``: the JSON Schema of job files, for editors (thin over the job model)."""

from __future__ import annotations

import json

import click

from runner.job.model import Job
from runner.kinds import MODULES, kind_named


@click.command()
@click.option("--kind", type=click.Choice(MODULES), help="Print the schema of one kind's item.")
def schema(kind: str | None) -> None:
    """Print the JSON Schema of a job file, or of one kind's item.

    Editors that read JSON Schema (VS Code with the YAML extension, for one) then complete
    and check job files as they are typed. Item fields may hold Jinja text, so the job
    schema leaves `defaults` and `items.template` open; `--kind` gives their fields.

    \b
    Examples:
      runner schema > job.schema.json
      runner schema --kind remittance
    """
    model = Job if kind is None else kind_named(kind).item
    document = model.model_json_schema(by_alias=True)
    click.echo(json.dumps(document, indent=2, sort_keys=False))
