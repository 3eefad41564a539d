"""Runs `runner` commands, each in a process of its own under a memory limit, fast: this
process imports runner once, then forks a child per command (the limit set in the child
before it runs, as a preexec_fn would), so that a corpus of commands pays Python's start-up
and runner's imports once, not once a command. One thread only: forking is safe.

Reads one JSON object a line on stdin: {"id", "args", "cwd", "env", "output", "limit"};
writes one a line on stdout as each child ends: {"id", "code", "seconds", "cpu_seconds",
"peak_rss"} (``cpu_seconds``: user + system, which a loaded machine does not inflate). At
most ``sys.argv[1]`` children run at once.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from typing import Any

import runner.cli
import runner.connect
import runner.engine.batch
import runner.job
import runner.state.sqlite
import runner.summary
import runner.validation  # noqa: F401 - imported once, here, for every child


def child(command: dict[str, Any]) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (command["limit"], command["limit"]))
    os.chdir(command["cwd"])
    os.environ.update(command["env"])
    descriptor = os.open(command["output"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(descriptor, 1)
    os.dup2(descriptor, 2)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)
    code = 0
    try:
        runner.cli.main(command["args"], prog_name="runner")
    except SystemExit as exit:
        code = exit.code if isinstance(exit.code, int) else 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def serve(at_once: int) -> None:
    pending = [json.loads(line) for line in sys.stdin if line.strip()]
    running: dict[int, tuple[str, float]] = {}
    while pending or running:
        while pending and len(running) < at_once:
            command = pending.pop(0)
            pid = os.fork()
            if pid == 0:
                child(command)
            running[pid] = (command["id"], time.monotonic())
        pid, status, usage = os.wait4(-1, 0)
        name, started = running.pop(pid)
        print(json.dumps({"id": name, "code": os.waitstatus_to_exitcode(status),
                          "seconds": time.monotonic() - started,
                          "cpu_seconds": usage.ru_utime + usage.ru_stime,
                          "peak_rss": usage.ru_maxrss * 1024}), flush=True)


if __name__ == "__main__":
    serve(int(sys.argv[1]))
