"""Every file runner writes, written one way: new, whole, never through a link, and for its
owner's eyes only.

The state database (with SQLite's WAL and shared-memory files beside it, which SQLite gives
the database file's permissions), the summaries under ``reports/``, plan files, the files of
``--output`` and the embedded sandbox's journal hold beneficiaries' names, masked
identifiers and amounts. So:

- a file runner writes whole (``replacing``: a plan, a summary, a report, a CSV) is written
  to a new temporary file beside it, created exclusively (``O_CREAT|O_EXCL``, so never
  through a link placed there beforehand) and readable and writable by its owner only, then
  renamed over the name asked for: a reader never sees half a file, and a full disk leaves
  the name as it was. What is already at that name must be a regular file (it is replaced);
  a symbolic link, a device, a FIFO or a folder there is refused (``FileNotWritten``, exit
  74), never written through;
- a file runner creates to keep writing in (the state database, the sandbox's journal) is
  created exclusively and private (``private_file``); one that already exists is used as
  it is: a person may have placed or shared it on purpose;
- a folder runner creates for them is usable by its owner only, its missing parents too.

One file is meant for other eyes: the metrics file (``--metrics-file``), read by
node_exporter's textfile collector, which runs as another user. It is written the same way
(``replacing(path, shared=True)``), but readable by all (0644; it holds counts and totals,
no names nor accounts), into a folder that must exist (a private one made for it would hide
it from the collector).
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from runner.errors import FileNotWritten

PRIVATE_FILE = 0o600
PRIVATE_FOLDER = 0o700
SHARED_FILE = 0o644


def private_folder(path: Path) -> None:
    """Create the folder ``path`` and its missing parents, each usable by its owner only."""
    missing = []
    while not path.is_dir():
        missing.append(path)
        if path.parent == path:
            break
        path = path.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made meanwhile: used as it is
            folder.mkdir(mode=PRIVATE_FOLDER)


def private_file(path: Path) -> None:
    """Create ``path``, empty and private, unless it exists."""
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC,
                         PRIVATE_FILE))


@contextlib.contextmanager
def replacing(path: Path, shared: bool = False) -> Iterator[TextIO]:
    """A stream to write ``path`` whole: a new private file beside it, renamed over ``path``
    when the block ends well, removed when it does not. UTF-8, line ends as they are.
    FileNotWritten (exit 74) names the file and why: a full disk, no permission, a link, a
    device or a folder in its place. ``shared``: readable by all, in an existing folder."""
    _refuse_what_is_there(path)
    try:
        if not shared:
            private_folder(path.parent)
        descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.",
                                                 suffix=".partial")
    except OSError as exc:
        raise _not_written(path, exc) from None
    try:
        with open(descriptor, "w", encoding="utf-8", newline="") as stream:
            yield stream
            stream.flush()
            os.fsync(stream.fileno())  # the data on disk before the name points at it
        if shared:
            os.chmod(temporary, SHARED_FILE)
        _refuse_what_is_there(path)
        os.replace(temporary, path)
    except OSError as exc:
        raise _not_written(path, exc) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


def write_private(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8, line ends as they are) to ``path``, whole (``replacing``)."""
    with replacing(path) as stream:
        stream.write(text)


def in_the_way(path: Path) -> str | None:
    """What is at ``path`` when it is not a regular file: "a symbolic link", "a folder" or
    "not a regular file" (a FIFO, a device, a socket); None when nothing is, or a regular
    file. OSError when it cannot be told."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISREG(mode):
        return None
    return "a symbolic link" if stat.S_ISLNK(mode) else "a folder" if stat.S_ISDIR(mode) \
        else "not a regular file"


_WHY_NOT = {"a symbolic link": " (runner does not write through links; remove it or name the "
                               "file itself)",
            "not a regular file": " (runner writes a file whole, then renames it into place)"}


def _refuse_what_is_there(path: Path) -> None:
    try:
        what = in_the_way(path)
    except OSError as exc:
        raise _not_written(path, exc) from None
    if what is not None:
        raise FileNotWritten(f"{path}: cannot write: {what}{_WHY_NOT.get(what, '')}")


def _not_written(path: Path, exc: OSError) -> FileNotWritten:
    return FileNotWritten(f"{path}: cannot write: {exc.strerror or exc}")
