"""The optional parts of the distribution (its extras), and the message a user gets when a
job or a command needs one that is not installed.

``sandbox`` (fastapi, uvicorn): ``base_url: sandbox`` and ``runner sandbox serve``;
``postgresql`` (psycopg and its pool): ``--state postgresql://...``; ``console`` (starlette,
uvicorn, webauthn, itsdangerous): `runner console`. A production runner against the
provider's API with a SQLite state needs neither.
"""

from __future__ import annotations

import importlib

from runner.errors import MissingExtra

DISTRIBUTION = "payrunner"
EXTRAS = {"sandbox": ("fastapi", "uvicorn"), "postgresql": ("psycopg", "psycopg_pool"),
          "console": ("starlette", "uvicorn", "webauthn", "itsdangerous")}


def require(extra: str, what: str) -> None:
    """Raise MissingExtra, naming ``what`` needs it, unless ``extra``'s libraries import."""
    for module in EXTRAS[extra]:
        try:
            importlib.import_module(module)
        except ImportError:
            raise MissingExtra(
                f"{what} needs the {extra!r} extra, which is not installed ({module} is "
                f"missing): pip install '{DISTRIBUTION}[{extra}]' (with pipx: pipx install "
                f"--force '{DISTRIBUTION}[{extra}]')") from None
