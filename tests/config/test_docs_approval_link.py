"""The tool-approval chapter's ``approval_url`` snippet, loaded as written into the treasury example:
it sets the link under ``[approval]``, where the chapter says it goes."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from mcp_approval.config import ConfigError, load_config
from tests.support.treasury import deployment_dir

CHAPTER = Path(__file__).resolve().parents[2] / "docs" / "tool-approval.md"
HEADING = "## URL-mode approval links (`approval_url`)"


def snippet() -> dict[str, dict[str, str]]:
    text = CHAPTER.read_text(encoding="utf-8")
    section = text[text.index(HEADING) :]
    match = re.search(r"```toml\n(.*?)```", section, re.DOTALL)
    assert match is not None, f"no toml block under {HEADING}"
    return tomllib.loads(match.group(1))


def test_the_snippet_sets_the_link_in_the_approval_section(tmp_path: Path) -> None:
    document = snippet()
    assert list(document) == ["approval"], "the chapter says [approval] approval_url"
    config = load_config(deployment_dir(tmp_path, document) / "config.toml")
    assert config.approval.approval_url == document["approval"]["approval_url"]


def test_a_bad_link_names_the_field_the_chapter_names(tmp_path: Path) -> None:
    directory = deployment_dir(tmp_path, {"approval": {"approval_url": "ftp://reviews.example.com/{approval_id}"}})
    with pytest.raises(ConfigError, match=r"approval\.approval_url: approval_url must be an absolute https URL"):
        load_config(directory / "config.toml")
    assert "`approval.approval_url`" in CHAPTER.read_text(encoding="utf-8")
