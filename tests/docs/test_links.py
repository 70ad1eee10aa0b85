"""README.md fits on two pages and every relative link of README.md and docs/ leads to a file that exists."""

from __future__ import annotations

import re
from pathlib import Path

from tests.docs.examples import REPO, documentation_files

LINK = re.compile(r"\]\(([^)\s]+)\)")
README_MAX_LINES = 260  # two printed pages, about 250 lines


def relative_targets(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t) and not t.startswith("#")]


def test_readme_fits_on_two_pages() -> None:
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES


def test_every_relative_link_leads_to_a_file() -> None:
    missing = [
        f"{path.relative_to(REPO)} -> {target}"
        for path in documentation_files()
        for target in relative_targets(path)
        if not (path.parent / target.split("#", 1)[0]).exists()
    ]
    assert missing == []


def test_the_readme_links_every_topic_file_of_docs() -> None:
    linked = {t.split("#", 1)[0] for t in relative_targets(REPO / "README.md")}
    topics = {f"docs/{p.name}" for p in (REPO / "docs").glob("*.md")}
    assert topics - linked == set()
