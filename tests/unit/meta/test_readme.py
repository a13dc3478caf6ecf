"""The README is a front door: short, the two commands first, and no link in it or in docs/ leads nowhere.

Links are read with a Markdown parser (markdown-it-py, which rich already brings), so a link inside a code
span or block is not one, and reference-style links count. A link into a Markdown file with a `#fragment`
must name one of that file's headings (GitHub's anchor for it). Other helpers rename files and headings;
this is what tells them a page still points at the old name.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
COMMANDS = [
    "bash scripts/install.sh && .venv/bin/harnessrl train examples/demo/config.toml",
    "bash scripts/test.sh",
]
MAX_LINES, MAX_WORDS = 150, 1800

_md = MarkdownIt("commonmark").enable("table")


def _tokens(text: str) -> list:
    return _md.parse(text)


def _links(text: str) -> list[str]:
    """Every link and image target in a Markdown text (inline and reference-style)."""
    out = []
    for tok in _tokens(text):
        for child in tok.children or []:
            if child.type == "link_open":
                out.append(str(child.attrs["href"]))
            elif child.type == "image":
                out.append(str(child.attrs["src"]))
    return out


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@cache
def _anchors(path: Path) -> frozenset[str]:
    """The anchors GitHub gives a Markdown file's headings (a repeated heading gets -1, -2, ...)."""
    tokens = _tokens(path.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    for i, tok in enumerate(tokens):
        if tok.type != "heading_open":
            continue
        slug = _slug("".join(c.content for c in tokens[i + 1].children or [] if c.type in ("text", "code_inline")))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        if n:
            seen[f"{slug}-{n}"] = 1
    return frozenset(seen)


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """The relative links of a page that point at no file of the repository (or at no heading of it)."""
    bad = []
    for target in _links(page.read_text(encoding="utf-8")):
        parts = urlsplit(target)
        if parts.scheme or parts.netloc or target.startswith("//"):
            continue  # a URL, not a file of the repository
        path = (page.parent / unquote(parts.path)).resolve() if parts.path else page.resolve()
        if not path.is_relative_to(root.resolve()) or not path.exists():
            bad.append(f"{target}: no such file")
        elif parts.fragment and path.suffix == ".md" and unquote(parts.fragment) not in _anchors(path):
            bad.append(f"{target}: no heading #{parts.fragment} in {path.name}")
    return bad


def test_readme_is_short():
    text = README.read_text(encoding="utf-8")
    lines, words = text.count("\n"), len(text.split())  # what `wc -l` and `wc -w` count
    assert lines <= MAX_LINES, f"README.md is {lines} lines (at most {MAX_LINES}): history goes to docs/measurements.md"
    assert words <= MAX_WORDS, f"README.md is {words} words (at most {MAX_WORDS}): history goes to docs/measurements.md"


def test_readme_opens_with_the_two_commands():
    fences = [t for t in _tokens(README.read_text(encoding="utf-8")) if t.type == "fence"]
    assert fences, "README.md has no fenced code block"
    assert fences[0].content.splitlines() == COMMANDS


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_lead_somewhere(page):
    assert broken_links(page) == []


def test_broken_links_are_found(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "b.md").write_text("# B page\n\n## Section `two`, again\n\n## Section `two`, again\n")
    page = tmp_path / "docs" / "a.md"
    page.write_text(
        "# A\n\n[ok](b.md) [ok](b.md#section-two-again) [ok](b.md#section-two-again-1) [ok](#a)\n"
        "[web](https://example.com/x.md) `[code](missing.md)`\n\n    [indented](missing.md)\n\n"
        "[gone](missing.md) [out](../../etc/passwd) [anchor](b.md#nope) [ref][r]\n\n[r]: moved.md\n"
    )
    assert broken_links(page, tmp_path) == [
        "missing.md: no such file",
        "../../etc/passwd: no such file",
        "b.md#nope: no heading #nope in b.md",
        "moved.md: no such file",
    ]
