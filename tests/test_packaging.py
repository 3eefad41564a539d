"""The distribution: its name and metadata, the examples shipped once in the package and
copied out by `runner init`, and the message when an extra is missing. (The built wheel
installed with pipx in a fresh environment: benchmarks/installed_wheel.py.)"""

from __future__ import annotations

import fnmatch
import subprocess
import sys
import tomllib
from pathlib import Path

from click.testing import CliRunner

from runner.cli import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "runner" / "examples"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_the_examples_are_one_copy_in_the_package_and_all_shipped() -> None:
    for folder in ("jobs", "templates"):  # the README's paths are links to the package's
        assert (ROOT / folder).is_symlink()
        assert (ROOT / folder).resolve() == EXAMPLES / folder
    shipped = PROJECT["tool"]["setuptools"]["package-data"]["runner"]
    files = [p.relative_to(ROOT / "runner").as_posix() for p in EXAMPLES.rglob("*")
             if p.is_file()]
    assert len(files) >= 18 and "jobs/payroll.yaml" in {f[9:] for f in files}
    assert [f for f in files if not any(fnmatch.fnmatch(f, g) for g in shipped)] == []
    assert not any(p.is_dir() for p in (EXAMPLES / "jobs").iterdir())  # globs go one deep


def test_the_distribution_has_its_own_name_a_licence_and_extras() -> None:
    project = PROJECT["project"]
    assert project["name"] == "payrunner" and project["scripts"] == {"runner":
                                                                      "runner.cli:entry"}
    assert project["license"] == "Apache-2.0" and (ROOT / "LICENSE").is_file()
    assert "Apache License" in (ROOT / "LICENSE").read_text(encoding="utf-8")[:200]
    assert project["urls"]["Homepage"].startswith("https://")
    extras = project["optional-dependencies"]
    assert [d.split(">")[0] for d in extras["sandbox"]] == ["fastapi", "uvicorn[standard]"]
    assert [d.split(">")[0] for d in extras["postgresql"]] == ["psycopg[binary,pool]"]
    assert not any(d.startswith(("fastapi", "uvicorn", "psycopg"))
                   for d in project["dependencies"])


def test_init_starts_a_folder_whose_job_runs_as_it_is(tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    result = CliRunner().invoke(main, ["init", str(folder)])
    assert result.exit_code == 0, result.output
    written = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")
                     if p.is_file())
    expected = sorted(p.relative_to(EXAMPLES).as_posix() for p in EXAMPLES.rglob("*")
                      if p.is_file())
    assert written == expected
    assert result.stdout == f"{len(written)} files written under {folder}; try: cd {folder} " \
                            "&& runner run jobs/payroll.yaml\n"
    for name in written:
        assert (folder / name).read_bytes() == (EXAMPLES / name).read_bytes()
    checked = CliRunner().invoke(main, ["validate", str(folder / "jobs" / "payroll.yaml"),
                                        "--state", str(tmp_path / "s.sqlite")])
    assert checked.exit_code == 0 and checked.stdout.endswith(
        "60 items, 60 valid, 0 invalid; EUR 78,688.33 over 60 items\n"), checked.output
    # Again: refused whole, nothing overwritten.
    (folder / "jobs" / "payroll.csv").write_text("mine\n")
    again = CliRunner().invoke(main, ["init", str(folder)])
    assert again.exit_code == 2 and again.stderr.startswith(
        f"error: {len(written)} file(s) already there, nothing was written: "
        f"{folder}/jobs/cancels.yaml, ")
    assert (folder / "jobs" / "payroll.csv").read_text() == "mine\n"


def test_a_missing_extra_is_named_with_its_install_command(tmp_path: Path) -> None:
    absent = ("import sys\nfor m in ('fastapi', 'uvicorn', 'psycopg'): sys.modules[m] = None\n"
              "from runner.cli import main\nmain()\n")

    def runner(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", absent, *args], cwd=ROOT, timeout=120,
                              capture_output=True, text=True)

    run = runner("run", "jobs/payroll.yaml", "--yes", "-q", "--state", str(tmp_path / "s.sqlite"))
    assert (run.returncode, run.stdout) == (78, "")
    assert run.stderr == (
        "error: base_url: sandbox (the embedded provider sandbox) needs the 'sandbox' extra, "
        "which is not installed (fastapi is missing): pip install 'payrunner[sandbox]' (with "
        "pipx: pipx install --force 'payrunner[sandbox]')\n"), run.stderr
    status = runner("status", "jobs/payroll.yaml", "--state", "postgresql://u@localhost/db")
    assert (status.returncode, status.stderr) == (78, (
        "error: a state in PostgreSQL (--state postgresql://...) needs the 'postgresql' "
        "extra, which is not installed (psycopg is missing): pip install "
        "'payrunner[postgresql]' (with pipx: pipx install --force 'payrunner[postgresql]')\n"))
