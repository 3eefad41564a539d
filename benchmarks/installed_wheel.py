"""Check: the built wheel, installed with pipx in a fresh environment, starts a folder and
pays its example job from it (too slow for the suite: it builds, downloads and installs).

Run from the repository root:

    .venv/bin/python benchmarks/installed_wheel.py [--keep DIR]

Steps, each printed with its outcome: build the wheel (pip wheel, isolated); check what it
holds (the examples, the licence, the metadata: name, licence, URLs, extras); install pipx in
a scratch virtualenv; ``pipx install`` the wheel with the ``sandbox`` extra; in an empty
folder ``runner init demo`` then ``runner run jobs/payroll.yaml --yes`` from ``demo`` (exit
0, every item settled); ``pipx install`` it again without extras: the same run exits 78
naming the missing extra. Prints the size of each pipx environment. Exits 1 at the first
step that fails.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def step(title: str, command: list[str], cwd: Path, env: dict[str, str] | None = None,
         expect: int = 0) -> str:
    print(f"$ {' '.join(command)}  (in {cwd.name or cwd})", flush=True)
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=900)
    output = (done.stdout + done.stderr).strip()
    if output:
        print("  " + output.replace("\n", "\n  ")[-3000:])
    if done.returncode != expect:
        print(f"FAILED: {title}: exit {done.returncode}, expected {expect}")
        sys.exit(1)
    print(f"ok: {title} (exit {done.returncode})")
    return output


def check_wheel(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = next(archive.read(n).decode() for n in names if n.endswith("/METADATA"))
    examples = {p.relative_to(ROOT).as_posix() for folder in ("jobs", "templates")
                for p in (ROOT / "runner" / "examples" / folder).iterdir()}
    missing = sorted(n for n in examples if n not in names)
    wanted = ["Name: payrunner", "License-Expression: Apache-2.0", "Project-URL: Homepage",
              "Provides-Extra: sandbox", "Provides-Extra: postgresql"]
    absent = [w for w in wanted if w not in metadata]
    licence = [n for n in names if n.endswith("licenses/LICENSE")]
    if missing or absent or not licence:
        print(f"FAILED: the wheel lacks {missing} {absent} {'' if licence else 'LICENSE'}")
        sys.exit(1)
    print(f"ok: the wheel holds the {len(examples)} example files, the licence, and "
          f"{', '.join(wanted)}")


def size(folder: Path) -> str:
    total = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()
                and not p.is_symlink())
    return f"{total / 2**20:.0f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="work here and keep it (default: a "
                                                  "temporary folder, removed)")
    args = parser.parse_args()
    scratch = args.keep or Path(tempfile.mkdtemp(prefix="wheel-check-"))
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        dist = scratch / "dist"
        step("build the wheel", [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                                 "-w", str(dist), str(ROOT)], scratch)
        wheel = next(dist.glob("payrunner-*.whl"))
        check_wheel(wheel)
        tools = scratch / "tools"
        step("a virtualenv for pipx", [sys.executable, "-m", "venv", str(tools)], scratch)
        step("pipx from the package index", [str(tools / "bin" / "pip"), "install", "-q",
                                             "pipx"], scratch)
        pipx = str(tools / "bin" / "pipx")
        for extras, home in (("[sandbox]", "with-sandbox"), ("", "plain")):
            env = {**os.environ, "PIPX_HOME": str(scratch / home),
                   "PIPX_BIN_DIR": str(scratch / home / "bin"),
                   "PIPX_MAN_DIR": str(scratch / home / "man")}
            env.pop("RUNNER_STATE", None)
            env.pop("RUNNER_STATE_DIR", None)
            step(f"pipx install the wheel{extras}", [pipx, "install", f"{wheel}{extras}"],
                 scratch, env)
            runner = str(scratch / home / "bin" / "runner")
            empty = scratch / f"empty-{home}"
            empty.mkdir()
            step("runner --version", [runner, "--version"], empty, env)
            step("runner init demo", [runner, "init", "demo"], empty, env)
            if extras:
                out = step("runner run jobs/payroll.yaml from the started folder",
                           [runner, "run", "jobs/payroll.yaml", "--yes", "-q"],
                           empty / "demo", env)
                if "60 items: 60 settled" not in out:
                    print("FAILED: not every item settled")
                    sys.exit(1)
            else:
                out = step("without the sandbox extra: a clear message, exit 78",
                           [runner, "run", "jobs/payroll.yaml", "--yes", "-q"],
                           empty / "demo", env, expect=78)
                if "pip install 'payrunner[sandbox]'" not in out:
                    print("FAILED: the message does not name the extra")
                    sys.exit(1)
            print(f"size of the pipx environment{extras or ' without extras'}: "
                  f"{size(scratch / home / 'venvs')}")
        print("all steps passed")
    finally:
        if args.keep is None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
