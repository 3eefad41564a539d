"""The README and docs/ as a reader follows them: every relative link reaches a file (and a
heading, when it names one) of the repository, and no text cites a document that is not in
it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def anchors(page: Path) -> set[str]:
    headings = re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_links_reach_files_and_headings(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if target.startswith(("http://", "https://")):
            continue
        path, _, anchor = target.partition("#")
        reached = (page.parent / path).resolve() if path else page
        assert reached.is_file(), f"{page.name}: {target}"
        if anchor and reached.suffix == ".md":
            assert anchor in anchors(reached), f"{page.name}: {target}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_document_outside_the_repository_is_cited(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert not re.findall(r"DESIGN\.md|document [0-9]|\bspec/", text)
    for rule in re.findall(r"\brule [0-9]", text):  # defined in docs/exactly-once.md only
        assert "exactly-once.md#the-rules" in text or page.name == "exactly-once.md", rule


def test_no_source_cites_a_document_outside_the_repository() -> None:
    """Docstrings and comments point to pages of docs/, never to a file the repository does
    not hold (a design note, the provider's documents as files)."""
    sources = sorted(p for folder in ("runner", "tests", "benchmarks")
                     for p in (ROOT / folder).rglob("*.py"))
    cited = [f"{p.relative_to(ROOT)}:{n}" for p in sources
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"DESIGN\.md|STYLE\.md|\bspec/", line)]
    assert len(sources) > 100 and cited == []


def test_the_readme_starts_with_its_two_commands() -> None:
    first = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:4]
    assert first == [
        "```",
        "python3 -m venv .venv && .venv/bin/pip install -q -e '.[sandbox]' && "
        ".venv/bin/runner run jobs/payroll.yaml",
        "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/pytest -q",
        "```"]
