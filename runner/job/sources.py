"""The files a job is read from, opened one way: the job file and its rows file.

Each is a regular file: a FIFO or a device would never end (or would read a machine's
secrets), so anything else is refused, as is anything under ``/proc``, ``/sys`` or ``/dev``
(files there look regular, and ``/proc/self/environ`` holds the process's environment, its
credentials included). A link is followed to what it names, and the test is made on that.

A rows file (``items.from``) must also be under the job file's folder, or under the folder
``items.root`` names (relative to the job file): a job file cannot read a file of the
machine's that no one meant it to, through a path or a link pointing outside. Every message
names the file and says why; none quotes what is in it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from runner.errors import FileUnreadable

#: The folders of the system's special files: never read, whatever links point there.
SYSTEM_FOLDERS = (Path("/proc"), Path("/sys"), Path("/dev"))


def open_regular(path: Path) -> BinaryIO:
    """``path`` opened to be read as bytes, when it is a regular file (links followed)
    outside the system's special folders; FileUnreadable otherwise."""
    real = Path(os.path.realpath(path))
    if any(real.is_relative_to(folder) for folder in SYSTEM_FOLDERS):
        raise FileUnreadable(f"a special file of the system ({real.parts[1]}); a job reads "
                         "regular files only")
    try:
        # Not blocking: a FIFO opens at once, and is then refused for what it is.
        descriptor = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise FileUnreadable("no such file") from None
    except OSError as exc:
        raise FileUnreadable(f"cannot read: {exc.strerror or exc}") from None
    mode = os.fstat(descriptor).st_mode
    if not stat.S_ISREG(mode):
        os.close(descriptor)
        what = "a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else \
            "a device or a socket"
        raise FileUnreadable(f"not a regular file ({what})")
    os.set_blocking(descriptor, True)
    return os.fdopen(descriptor, "rb")


def read_regular(path: Path, limit: int, too_large: str) -> bytes:
    """The bytes of the file at ``path``, opened by ``open_regular``, and ``limit`` bytes at
    most: FileUnreadable(``too_large``) when it holds more (it is not read further)."""
    with open_regular(path) as file:
        data = file.read(limit + 1)
    if len(data) > limit:
        raise FileUnreadable(too_large)
    return data


def rows_file_problem(path: Path, root: Path, named: str = "") -> str | None:
    """Why the rows file ``path`` may not be read, for a job whose rows files are under
    ``root`` (``named`` so in messages; by default its path): ``PATH: why``; None when it
    may."""
    real, folder = Path(os.path.realpath(path)), Path(os.path.realpath(root))
    if not real.is_relative_to(folder):
        return (f"{path}: outside {named or root}, where the job's rows files are read from "
                "(items.root names another folder)")
    try:
        open_regular(path).close()
    except FileUnreadable as exc:
        return f"{path}: {exc}"
    return None
