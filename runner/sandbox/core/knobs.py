"""How a setting of the sandbox is declared: a dataclass field whose metadata holds a ``Knob``.

The settings are declared once, as the fields of ``SandboxConfig`` (core/config.py) and of
``FaultRule`` (core/faults.py). Everything that shows or changes them reads those fields: the
options of ``runner sandbox serve`` (runner/cli/sandbox.py), the admin API's ``Timing`` model
(core/admin.py), the checks of fault settings sent at run time (core/faults.py). A new knob is
one new field; none of them lists it again.

This module knows nothing of click or FastAPI: a Knob is plain data that they read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, get_type_hints


@dataclass(frozen=True)
class Knob:
    """What one setting means and how it is reached from outside."""

    help: str = ""
    unit: str = ""  # seconds, real seconds, milliseconds, share of calls, calls
    timing: bool = False  # ``PATCH /_admin/timing`` changes it at run time
    # The ``runner sandbox serve`` option: "" names it after the field (--submit-delay);
    # None gives it no option of its own (a fault counter, set through --fault).
    option: str | None = ""
    envvar: str | None = None
    metavar: str | None = None
    show_default: bool = True
    repeat: bool = False  # the option may be given several times; each value is read alone
    # The largest value taken (a number knob; each value of a tuple), from the command line
    # and at run time alike; numbers are never negative. None: no bound.
    maximum: float | None = None
    # The option's text to the value (ValueError when it is not one); None: by the field's type.
    # A tuple's default is written with commas between its values.
    read: Callable[[str], Any] | None = None


def knob(default: Any = dataclasses.MISSING, *, factory: Any = dataclasses.MISSING,
         **how: Any) -> Any:
    """A dataclass field with its Knob: ``x: float = knob(1.0, help="...", timing=True)``."""
    return dataclasses.field(default=default, default_factory=factory,
                             metadata={"knob": Knob(**how)})


@dataclass(frozen=True)
class Setting:
    """One declared setting: its field's name, type and default, and its Knob."""

    name: str
    type: Any
    default: Any
    knob: Knob

    @property
    def option(self) -> str | None:
        """The serve option's name (None when it has none)."""
        if self.knob.option is None:
            return None
        return self.knob.option or "--" + self.name.replace("_", "-")


def settings(cls: type) -> Iterator[Setting]:
    """The settings a dataclass declares, in their order of declaration."""
    hints = get_type_hints(cls)
    for f in dataclasses.fields(cls):
        how = f.metadata.get("knob")
        if how is None:
            continue
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = None
        yield Setting(f.name, hints[f.name], default, how)
