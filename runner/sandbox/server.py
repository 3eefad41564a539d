"""Serving the sandbox with uvicorn: in the foreground (``runner sandbox serve``) or in a
background thread on a port of its own (tests, and the runner's embedded sandbox).

The HTTP protocol is uvicorn's httptools one, with one addition: each request's scope carries
``sandbox.abort``, which drops the connection without an answer (the "lost response" fault).
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass, field
from typing import Any, cast

import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from runner.sandbox.app import Sandbox, build_app
from runner.sandbox.core.clock import SandboxClock
from runner.sandbox.core.config import SandboxConfig


class AbortableProtocol(HttpToolsProtocol):
    def on_message_begin(self) -> None:
        super().on_message_begin()
        scope = cast(dict[str, Any], self.scope)
        scope["extensions"] = {"sandbox.abort": self._abort}

    def _abort(self) -> None:
        if self.cycle is not None:
            self.cycle.disconnected = True  # nothing more is written for this request
        self.transport.abort()


def _uvicorn_config(app: FastAPI, config: SandboxConfig) -> uvicorn.Config:
    return uvicorn.Config(app, http=AbortableProtocol, lifespan="on",
                          access_log=False, log_level=config.log_level, timeout_keep_alive=30)


def _bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


def serve(config: SandboxConfig) -> None:
    """Serve in the foreground until interrupted."""
    app = build_app(config)
    server = uvicorn.Server(_uvicorn_config(app, config))
    server.run(sockets=[_bind(config.host, config.port)])


@dataclass
class RunningSandbox:
    """A sandbox serving in a thread; ``url`` is its base address."""

    url: str
    config: SandboxConfig
    app: FastAPI
    server: uvicorn.Server
    thread: threading.Thread
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def state(self) -> Sandbox:
        return self.app.state.sandbox  # type: ignore[no-any-return]

    def stop(self, wait: bool = True) -> None:
        """Ask the server to finish; ``wait`` until it has (state compacted, port closed)."""
        self.server.should_exit = True
        if wait:
            self.thread.join(timeout=10)

    def __enter__(self) -> RunningSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_in_thread(config: SandboxConfig | None = None,
                    clock: SandboxClock | None = None) -> RunningSandbox:
    """Start a sandbox on ``config.port`` (0: any free port) and wait until it answers."""
    config = config or SandboxConfig(port=0)
    app = build_app(config, clock)
    server = uvicorn.Server(_uvicorn_config(app, config))
    sock = _bind(config.host, config.port)
    host, port = sock.getsockname()[:2]
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]},
                              name=f"sandbox-{port}", daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the sandbox did not start")
        thread.join(0.005)
    shown = f"[{host}]" if ":" in host else host
    return RunningSandbox(f"http://{shown}:{port}", config, app, server, thread)
