"""The front door holds together: every relative link of the README and docs/ names a file
that is there (and a heading of it, when it names one), and the README stays short."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings."""
    found = set()
    fenced = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            text = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # http:, mailto:
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists() or (anchor and anchor not in anchors(linked)):
            broken.append(target)
    assert broken == []


def test_the_readme_is_a_front_door() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 300
    assert "../shared" not in text  # users never see the design notes beside the project
