"""Every relative link in the Markdown of this repository resolves on a fresh clone.

A link ``[text](path)`` or ``![alt](path)`` outside code must name a file (or directory) that
exists in the checkout, relative to the page that holds it; a ``#fragment`` on a Markdown page
must be one of that page's headings (as the site's table of contents spells them) or explicit
``{ #id }`` anchors. Links with a scheme (``https:``, ``mailto:``) are not followed.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The pages a reader opens from a clone: the README, the site's sources and the other READMEs.
PAGES = sorted(
    [
        ROOT / "README.md",
        ROOT / "benchmarks" / "README.md",
        *(ROOT / "docs").rglob("*.md"),
        *(ROOT / "conformance").glob("*.md"),
        *(ROOT / "examples").glob("*/README.md"),
    ]
)
_FENCE = re.compile(r"^(```|~~~).*?^\1\s*$", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.MULTILINE)
_ATTR_ID = re.compile(r"\{[^}]*#([\w-]+)[^}]*\}")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def prose(markdown: str) -> str:
    """``markdown`` without fenced code blocks and code spans (links there are examples)."""
    return _CODE_SPAN.sub("", _FENCE.sub("", markdown))


def relative_links(markdown: str) -> list[str]:
    """The link targets in ``markdown``'s prose that have no scheme."""
    return [target for target in _LINK.findall(prose(markdown)) if not _SCHEME.match(target)]


def slug(heading: str) -> str:
    """The anchor Python-Markdown's table of contents gives a heading."""
    text = _ATTR_ID.sub("", heading)
    text = re.sub(r"`([^`]*)`", r"\1", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    found = {slug(heading) for heading in _HEADING.findall(text)}
    return found | set(_ATTR_ID.findall(text))


def broken(page: Path, target: str, root: Path = ROOT) -> str | None:
    """Why ``target`` (a link on ``page``) does not resolve inside ``root``, or ``None``."""
    path_part, _, fragment = target.partition("#")
    resolved = (page.parent / unquote(path_part)).resolve() if path_part else page
    if not resolved.is_relative_to(root):
        return f"{target}: outside the repository"
    if not resolved.exists():
        return f"{target}: no such file {resolved.relative_to(root)}"
    if fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
        return f"{target}: no heading or anchor #{fragment} in {resolved.relative_to(root)}"
    return None


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    targets = relative_links(page.read_text(encoding="utf-8"))
    problems = [problem for target in targets if (problem := broken(page, target)) is not None]
    assert problems == [], f"{page.relative_to(ROOT)}: broken links:\n" + "\n".join(problems)


def test_the_checker_sees_a_broken_link_and_a_missing_anchor(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## Your `tools` here\n\n[a](page.md#your-tools-here) [b](nowhere.md) [c](#gone)\n")
    found = [broken(page, target, root=tmp_path) for target in relative_links(page.read_text())]
    assert found[0] is None
    assert "no such file" in str(found[1])
    assert "#gone" in str(found[2])


def test_links_in_code_are_examples_not_links() -> None:
    markdown = "`[x](missing.md)`\n\n```\n[y](missing.md)\n```\n[z](here.md) [w](https://example.com/a.md)\n"
    assert relative_links(markdown) == ["here.md"]
