"""The example jobs and their summary templates, shipped in the package
(``runner/examples/``: the checkout's ``jobs/`` and ``templates/`` are links to them, so there
is one copy), and ``runner init``'s copy of them into a folder of the user's.

The copy keeps the layout (``jobs/``, ``templates/``) so that a job's relative paths (its
rows file beside it, ``../templates/summary.html.j2``) hold. Nothing is overwritten: a
folder that already has one of the files is refused whole, before anything is written.
"""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

FOLDERS = ("jobs", "templates")
STARTER = "jobs/payroll.yaml"  # what the README runs first


def example_files() -> dict[str, Traversable]:
    """Every shipped example, by its path in a started folder (``jobs/payroll.yaml``)."""
    root = files("runner") / "examples"
    return {f"{folder}/{entry.name}": entry
            for folder in FOLDERS for entry in sorted((root / folder).iterdir(),
                                                      key=lambda e: e.name)
            if entry.is_file()}


def existing(folder: Path) -> list[Path]:
    """The files of a start in ``folder`` that are there already."""
    return [folder / name for name in example_files() if (folder / name).exists()
            or (folder / name).is_symlink()]


def start(folder: Path) -> list[Path]:
    """Copy every example into ``folder`` (made if missing); the files written. Call
    ``existing`` first: a file that appears meanwhile stops the copy (FileExistsError)."""
    written = []
    for name, source in example_files().items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "xb") as out:  # never over a file, nor through a link
            out.write(source.read_bytes())
        written.append(target)
    return written
