"""The files that hold personal data, created for their owner's eyes only.

The state database (with SQLite's WAL and shared-memory files beside it, which SQLite gives
the database file's permissions), the summaries under ``reports/`` and the embedded
sandbox's journal hold beneficiaries' names, masked identifiers and amounts. runner creates
each readable and writable by its owner only, and a folder it creates for them usable by its
owner only. Files and folders that already exist keep their permissions: a person may have
shared them on purpose.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TextIO

PRIVATE_FILE = 0o600
PRIVATE_FOLDER = 0o700


def private_folder(path: Path) -> None:
    """Create the folder ``path`` (and its parents) if missing, usable by its owner only."""
    path.mkdir(mode=PRIVATE_FOLDER, parents=True, exist_ok=True)


def private_file(path: Path) -> None:
    """Create ``path``, empty and private, unless it exists."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE))
    except FileExistsError:
        pass


def open_private(path: Path) -> TextIO:
    """``path`` opened to be written (UTF-8, line ends as they are); a new file is private."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
    return open(descriptor, "w", encoding="utf-8", newline="")


def write_private(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8, line ends as they are) to ``path``; a new file is private."""
    with open_private(path) as stream:
        stream.write(text)
