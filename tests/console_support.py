"""The console as the browser tests drive it: `runner console` in a process of its own on a
free loopback port (ended by the test whatever happens), and Chromium (Debian's) through
Playwright, each person in a browser context of their own with a virtual passkey
authenticator (the DevTools protocol's WebAuthn domain)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
STARTED = re.compile(r"console at (https?://localhost:\d+) ")


@dataclass
class RunningConsole:
    url: str
    process: subprocess.Popen[str]


@contextmanager
def console(state: Path, *options: str, env: dict[str, str] | None = None
            ) -> Iterator[RunningConsole]:
    """`runner console --state STATE --port 0 ...`, until the block ends."""
    process = subprocess.Popen(
        [sys.executable, "-m", "runner", "console", "--state", str(state), "--port", "0",
         *options], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
        env={**os.environ, **(env or {})})
    try:
        assert process.stderr is not None
        line = process.stderr.readline()  # blocks until it listens (or ends)
        found = STARTED.search(line)
        assert found, line + process.stderr.read()
        yield RunningConsole(found.group(1), process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()


@dataclass
class Person:
    """One person's browser (a context of its own) and its passkey authenticator."""

    name: str
    page: Any
    base: str

    def go(self, path: str) -> Any:
        self.page.goto(self.base + path)
        return self.page

    def register(self) -> str:
        """Register a passkey; the passkeys file's line the console shows."""
        page = self.go("/register")
        page.fill("#register input[name=name]", self.name)
        page.click("#register button")
        page.wait_for_selector("#registered:not([hidden])", timeout=60_000)
        return str(page.inner_text("#line")).strip()

    def sign_in(self) -> None:
        page = self.go("/sign-in")
        page.fill("#sign-in input[name=name]", self.name)
        page.click("#sign-in button")
        page.wait_for_selector(".who", timeout=60_000)

    def message(self) -> str:
        """What the page says after an act (its status line)."""
        self.page.wait_for_selector("#message:not([hidden])", timeout=60_000)
        return str(self.page.inner_text("#message"))


@contextmanager
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM,
                                     args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            yield chromium
        finally:
            chromium.close()


def person(chromium: Any, name: str, base: str) -> Person:
    """A browser context for ``name`` with a virtual authenticator that holds passkeys and
    verifies its user (a fingerprint or a PIN, always given)."""
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(60_000)
    session = context.new_cdp_session(page)
    session.send("WebAuthn.enable")
    session.send("WebAuthn.addVirtualAuthenticator", {"options": {
        "protocol": "ctap2", "transport": "internal", "hasResidentKey": True,
        "hasUserVerification": True, "isUserVerified": True,
        "automaticPresenceSimulation": True}})
    return Person(name, page, base)


def signed_in(base: str, passkey: Any) -> tuple[Any, dict[str, str]]:
    """A requests session signed in to the console at ``base`` with ``passkey`` (a
    ``passkey_support.SoftPasskey``), and the headers its calls carry (the CSRF token)."""
    import requests

    from runner import passkeys

    passkey.origin = base
    session = requests.Session()
    page = session.get(base + "/sign-in", timeout=60).text
    token = re.search(r'name="csrf" content="([^"]+)"', page)
    assert token, page
    headers = {"X-CSRF-Token": token.group(1)}
    options = session.post(base + "/api/sign-in-options", json={"name": passkey.principal},
                           headers=headers, timeout=60)
    assert options.status_code == 200, options.text
    credential = passkey.credential(passkeys.from_b64url(options.json()["challenge"]))
    done = session.post(base + "/api/sign-in", json={"credential": credential},
                        headers=headers, timeout=60)
    assert done.status_code == 200, done.text
    page = session.get(base + "/", timeout=60).text  # a new session: a new token
    token = re.search(r'name="csrf" content="([^"]+)"', page)
    assert token, page
    return session, {"X-CSRF-Token": token.group(1)}
