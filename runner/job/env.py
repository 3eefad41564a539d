"""``${VAR}`` and ``${VAR:-default}`` in a job file, filled from the environment.

Runs on the raw YAML tree, before the job model sees it, so any text value may use it
(``api_key: ${RUNNER_API_KEY}``, ``port: ${SMTP_PORT:-587}``). Secrets stay out of job
files this way, and runner never writes the resolved values anywhere.

- ``${VAR}``: the variable's value; an unset variable is an error naming it (an empty one is
  taken as it is).
- ``${VAR:-default}``: the default when the variable is unset or empty, as in the shell.
  The default may itself hold references (``${A:-${B}}``, ``${A:-${B:-x}}``), filled only
  when it is used (an unset ``B`` is no error while ``A`` is set), as the shell does; at
  most ``NESTING_MAX`` deep.
- ``$${`` writes a literal ``${``.
- A value from the environment is taken as it is: a ``${`` in it is not filled again.

Substitution happens inside text only; keys are never substituted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from runner.errors import JobError
from runner.job.document import Lines, Location, dotted, line_at

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: References inside defaults inside references: more is a typo, or a bomb.
NESTING_MAX = 8
_USAGE = "write ${NAME} or ${NAME:-default} (or $${ for a literal ${)"
_SPECIAL = re.compile(r"\$\$\{|\$\{|\}")


def substitute(
    tree: Any, environ: Mapping[str, str], file: str, lines: Lines
) -> tuple[Any, list[JobError]]:
    """A copy of ``tree`` with every reference filled, and an error per unusable one."""
    errors: list[JobError] = []

    def walk(value: Any, location: Location) -> Any:
        if isinstance(value, str):
            if "${" not in value:
                return value
            filler = _Filler(value, environ)
            filled = filler.fill()
            errors.extend(JobError(file, line_at(lines, location), dotted(location), message)
                          for message in filler.problems)
            return filled
        if isinstance(value, dict):
            return {key: walk(child, (*location, key)) for key, child in value.items()}
        if isinstance(value, list):
            return [walk(child, (*location, i)) for i, child in enumerate(value)]
        return value

    return walk(tree, ()), errors


class _Filler:
    """One text's references filled, left to right, as the shell reads them."""

    def __init__(self, text: str, environ: Mapping[str, str]) -> None:
        self.text = text
        self.environ = environ
        self.problems: list[str] = []
        self._too_deep = False

    def fill(self) -> str:
        filled, _ = self._until(0, depth=0, used=True, closing=False)
        if self._too_deep:  # what was read past it is no reference: say this only
            self.problems = [f"references nested more than {NESTING_MAX} deep in defaults; "
                             + _USAGE]
            return self.text
        return filled

    def _until(self, at: int, depth: int, used: bool, closing: bool) -> tuple[str, int]:
        """The text from ``at`` filled, up to its end, or (``closing``) to the ``}`` that
        closes the reference it is the default of: the result and where it stopped.
        ``used`` False: a default not used, read for its form only."""
        text, parts = self.text, []
        while (found := _SPECIAL.search(text, at)) is not None:
            parts.append(text[at:found.start()])
            at = found.start()
            if found[0] == "$${":
                parts.append("${")
                at += 3
            elif found[0] == "${":
                value, at = self._reference(at, depth, used)
                parts.append(value)
            elif closing:
                return "".join(parts), at
            else:
                parts.append("}")
                at += 1
        parts.append(text[at:])
        return "".join(parts), len(text)

    def _reference(self, at: int, depth: int, used: bool) -> tuple[str, int]:
        """The value of the reference ``${...}`` starting at ``at``, and where it ends."""
        text = self.text
        name = _NAME.match(text, at + 2)
        after = name.end() if name else at + 2
        if name and text.startswith("}", after):
            return self._value(name[0], used), after + 1
        if name and text.startswith(":-", after):
            if depth == NESTING_MAX:
                self._too_deep = True
                return "", len(text)
            value = self.environ.get(name[0])
            default, end = self._until(after + 2, depth + 1, used and not value, closing=True)
            if end < len(text):  # the default's closing brace
                return (value if value else default), end + 1
        bad = text[at:text.find("}", at) + 1 or len(text)]
        self.problems.append(f"{bad[:60]!r} is not a variable reference; {_USAGE}")
        return bad, at + len(bad)

    def _value(self, name: str, used: bool) -> str:
        value = self.environ.get(name)
        if value is None:
            if used:
                self.problems.append(f"environment variable {name} is not set (write "
                                     f"${{{name}:-default}} to allow a default)")
            return ""
        return value
