"""``${VAR}`` and ``${VAR:-default}`` in a job file, filled from the environment.

Runs on the raw YAML tree, before the job model sees it, so any text value may use it
(``api_key: ${RUNNER_API_KEY}``, ``port: ${SMTP_PORT:-587}``). Secrets stay out of job
files this way, and runner never writes the resolved values anywhere.

- ``${VAR}``: the variable's value; an unset variable is an error naming it (an empty one is
  taken as it is).
- ``${VAR:-default}``: the default when the variable is unset or empty, as in the shell.
- ``$${`` writes a literal ``${``.

Substitution happens inside text only; keys are never substituted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from runner.errors import JobError
from runner.job.document import Lines, Location, dotted, line_at

_REFERENCE = re.compile(
    r"\$\$\{"  # escaped
    r"|\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}"
    r"|(?P<bad>\$\{[^}]*\}?)"
)


def substitute(
    tree: Any, environ: Mapping[str, str], file: str, lines: Lines
) -> tuple[Any, list[JobError]]:
    """A copy of ``tree`` with every reference filled, and an error per unusable one."""
    errors: list[JobError] = []

    def walk(value: Any, location: Location) -> Any:
        if isinstance(value, str):
            return _fill(value, location) if "${" in value else value
        if isinstance(value, dict):
            return {key: walk(child, (*location, key)) for key, child in value.items()}
        if isinstance(value, list):
            return [walk(child, (*location, i)) for i, child in enumerate(value)]
        return value

    def _fill(text: str, location: Location) -> str:
        def replace(match: re.Match[str]) -> str:
            if match[0] == "$${":
                return "${"
            if match["bad"] is not None:
                fail(f"{match['bad']!r} is not a variable reference; write ${{NAME}} or "
                     "${NAME:-default} (or $${ for a literal ${)")
                return match[0]
            name = match["name"]
            value = environ.get(name)
            if match["default"] is not None:
                return value if value else match["default"]
            if value is None:
                fail(f"environment variable {name} is not set "
                     f"(write ${{{name}:-default}} to allow a default)")
                return ""
            return value

        def fail(message: str) -> None:
            errors.append(JobError(file, line_at(lines, location), dotted(location), message))

        return _REFERENCE.sub(replace, text)

    return walk(tree, ()), errors
