"""The JSON Schema of job files, as ``runner schema`` prints it for editors (VS Code's YAML
extension and the like check and complete job files with it).

It is the job model's own schema (pydantic's, draft 2020-12), made true to the file a person
writes rather than to the model after loading: wherever a value may stand, a
``${VAR}`` or ``${VAR:-default}`` reference may stand instead (it is filled from the
environment before the model sees it: ``port: ${SMTP_PORT:-587}``), so each value that is
not free text accepts a string holding one. It names its dialect (``$schema``) and itself
(``$id``), and every field of a job file carries a description (a test walks them).
"""

from __future__ import annotations

import copy
from typing import Any

DIALECT = "https://json-schema.org/draft/2020-12/schema"
REFERENCE = "EnvironmentReference"
# Words about a value, which stay beside the alternatives rather than inside one.
_ANNOTATIONS = ("title", "description", "default", "examples", "deprecated")
# What a plain string would not satisfy: a value of these types or with these constraints.
_TYPED = ("integer", "number", "boolean")
_CONSTRAINTS = ("enum", "const", "pattern", "format", "minLength", "maxLength")


def job_schema() -> dict[str, Any]:
    """The schema of a whole job file."""
    from runner.job.model import Job

    return document(Job.model_json_schema(by_alias=True), "urn:runner:job:1")


def item_schema(kind: str) -> dict[str, Any]:
    """The schema of one item of ``kind`` (what ``defaults`` and ``items.template`` make)."""
    from runner.kinds import kind_named

    model = kind_named(kind).item
    return document(model.model_json_schema(by_alias=True), f"urn:runner:item:{kind}:1")


def document(schema: dict[str, Any], identifier: str) -> dict[str, Any]:
    """``schema`` with its dialect and id first, and references accepted for values."""
    body = copy.deepcopy(schema)
    _walk(body)
    body.setdefault("$defs", {})[REFERENCE] = {
        "type": "string", "pattern": r"\$\{[A-Za-z_][A-Za-z0-9_]*(:-[^}]*)?\}",
        "description": "${VAR} or ${VAR:-default}: filled from the environment when the job "
                       "is loaded (the default when VAR is unset or empty)"}
    return {"$schema": DIALECT, "$id": identifier, **body}


def _walk(node: dict[str, Any]) -> None:
    """Accept references in every value position under ``node``."""
    properties = node.get("properties")
    if isinstance(properties, dict):
        for name, sub in properties.items():
            properties[name] = _value(sub)
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            node[key] = _value(node[key])
    for key in ("anyOf", "oneOf", "allOf"):
        for alternative in node.get(key, []):
            _walk(alternative)
    for definition in node.get("$defs", {}).values():
        _walk(definition)


def _value(schema: dict[str, Any]) -> dict[str, Any]:
    _walk(schema)
    if not _needs_reference(schema):
        return schema
    words = {k: v for k, v in schema.items() if k in _ANNOTATIONS}
    rest = {k: v for k, v in schema.items() if k not in _ANNOTATIONS}
    alternatives = rest["anyOf"] if list(rest) == ["anyOf"] else [rest]
    return {**words, "anyOf": [*alternatives, {"$ref": f"#/$defs/{REFERENCE}"}]}


def _needs_reference(schema: dict[str, Any]) -> bool:
    """A scalar a reference (a string) would not already satisfy."""
    if "$ref" in schema or schema.get("type") in ("object", "array"):
        return False
    if any(_needs_reference(a) for a in schema.get("anyOf", [])):
        return True
    return schema.get("type") in _TYPED or any(k in schema for k in _CONSTRAINTS)
