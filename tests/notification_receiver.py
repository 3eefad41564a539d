"""A partner's endpoint for callbacks and notifications in the sandbox's tests: a real HTTP
server on a free loopback port that records every POST (and the path of every GET) and
answers each POST with the next status of its script (200 once the script is used up; a 3xx
sends to /moved)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import simplejson

WAIT = 120.0  # seconds before a test calls a delivery lost (never a measure of speed)
STARTED = time.time()  # (before any delivery a test of this process sees)


@dataclass
class Ping:
    at: float  # time.monotonic() on arrival
    path: str
    headers: dict[str, str]  # names lower-cased
    raw: bytes
    arrived: float  # time.time() on arrival

    @property
    def json(self) -> Any:
        return simplejson.loads(self.raw, use_decimal=True)

    def dated_in_real_time(self) -> bool:
        """Its Date header was written by the real clock (not by the sandbox's, moved ahead
        by a test): after this process started, and not after it arrived."""
        sent = parsedate_to_datetime(self.headers["date"]).timestamp()
        return int(STARTED) <= sent <= self.arrived


class Receiver:
    def __init__(self, script: list[int] | None = None) -> None:
        self.script = list(script or [])
        self.received: list[Ping] = []
        self.gets: list[str] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver._lock:
                    receiver.received.append(Ping(
                        time.monotonic(), self.path,
                        {k.lower(): v for k, v in self.headers.items()}, raw, time.time()))
                    code = receiver.script.pop(0) if receiver.script else 200
                self.send_response(code)
                if 300 <= code < 400:
                    self.send_header("Location", "/moved")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:  # noqa: N802
                with receiver._lock:
                    receiver.gets.append(self.path)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.01}, daemon=True)
        self.thread.start()

    def url(self, path: str = "/notify") -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def wait_for(self, count: int, timeout: float = WAIT) -> list[Ping]:
        """The first ``count`` requests, polling until they have arrived."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                got = list(self.received)
            if len(got) >= count or time.monotonic() > deadline:
                assert len(got) >= count, f"{len(got)} of {count} notifications arrived"
                return got[:count]
            time.sleep(0.003)

    def stays_at(self, count: int, seconds: float) -> bool:
        """True when no more than ``count`` requests arrive within ``seconds``."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.received) > count:
                    return False
            time.sleep(0.003)
        with self._lock:
            return len(self.received) <= count

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

