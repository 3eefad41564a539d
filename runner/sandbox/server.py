"""Serving the sandbox with uvicorn: in the foreground (``runner sandbox serve``) or in a
background thread on a port of its own (tests, and the runner's embedded sandbox).

The HTTP protocol is uvicorn's httptools one, with two additions: each request's scope carries
``sandbox.abort``, which drops the connection without an answer (the "lost response" fault);
and header names go out in their canonical case (``X-Total-Pages``, ``Retry-After``), where
uvicorn writes them in lower case: header names are case-insensitive, but some clients read
them with case-sensitive maps, and the provider's reference writes them so.
"""

from __future__ import annotations

import asyncio
import functools
import socket
import threading
from dataclasses import dataclass, field
from typing import Any, cast

import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from runner.logs import uvicorn_config
from runner.sandbox.app import Sandbox, build_app
from runner.sandbox.core.clock import SandboxClock
from runner.sandbox.core.config import SandboxConfig


class AbortableProtocol(HttpToolsProtocol):
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.transport = cast(asyncio.Transport, CanonicalHeads(transport))

    def on_message_begin(self) -> None:
        super().on_message_begin()
        scope = cast(dict[str, Any], self.scope)
        scope["extensions"] = {"sandbox.abort": self._abort}

    def _abort(self) -> None:
        if self.cycle is not None:
            self.cycle.disconnected = True  # nothing more is written for this request
        self.transport.abort()


class CanonicalHeads:
    """The connection's transport, writing each answer's head (its status line and headers,
    written in one piece) with its header names in canonical case."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if data[:9] == b"HTTP/1.1 ":  # a head (the bodies are JSON or XML, never this)
            status, _, headers = bytes(data).partition(b"\r\n")
            data = status + b"\r\n" + b"\r\n".join(
                canonical(name) + sep + value
                for name, sep, value in (line.partition(b":") for line in headers.split(b"\r\n")))
        self._transport.write(data)


@functools.lru_cache(maxsize=256)
def canonical(name: bytes) -> bytes:
    """``x-total-pages`` as ``X-Total-Pages``."""
    return b"-".join(part[:1].upper() + part[1:] for part in name.split(b"-"))


def _uvicorn_config(app: FastAPI, config: SandboxConfig) -> uvicorn.Config:
    return uvicorn.Config(app, http=AbortableProtocol, lifespan="on",
                          access_log=False, log_level=config.log_level, timeout_keep_alive=30,
                          log_config=uvicorn_config(config.log_level))


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
