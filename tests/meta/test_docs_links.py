"""Issue 60, item 7: docs that stay true. Every image and relative link of the README and docs/
resolves to a file (and a heading, when it names one), and every table parses as a table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from tests.conftest import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings."""
    out = set()
    for title in re.findall(r"^#{1,6} (.+)$", page.read_text(), re.M):
        slug = re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")
        out.add(slug)
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_and_image_resolves(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists() or (anchor and file.suffix == ".md" and anchor not in _anchors(file)):
            broken.append(target)  # a file that is not there, or a heading the file has not
    assert broken == [], f"{page.name}: {broken}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_table_parses_as_a_table(page: Path) -> None:
    """A row cut off from its table (a blank line in it) renders as a paragraph of pipes."""
    tokens = MarkdownIt("commonmark").enable("table").parse(page.read_text())
    stray = [t.content.splitlines()[0] for t in tokens
             if t.type == "inline" and t.content.lstrip().startswith("|") and t.content.count("|") >= 3]
    assert stray == [], f"{page.name}: rows outside a table: {stray}"
