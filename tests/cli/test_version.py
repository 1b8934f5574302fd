"""One version, written once (``pyproject.toml``), read the same by the package, the command and the changelog."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import mcp_approval

ROOT = Path(__file__).resolve().parents[2]
WRITTEN = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
CHANGELOG = (ROOT / "CHANGELOG.md").read_text()
#: A heading of a released version in the changelog: ``## [0.3.0] - 2026-12-05``.
RELEASED = re.compile(r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})$", re.MULTILINE)


def _release(version: str) -> tuple[int, ...]:
    """``0.4.0.dev0`` -> ``(0, 4, 0)``."""
    return tuple(int(part) for part in version.split(".")[:3])


def test_the_command_prints_the_written_version() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mcp_approval", "--version"], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout == f"mcp-approval {WRITTEN}\n"


def test_the_package_carries_the_written_version() -> None:
    assert mcp_approval.__version__ == WRITTEN


def test_the_version_is_one_a_user_can_name() -> None:
    # A final release (0.4.0) or the next one in the making (0.4.0.dev0), as PEP 440 writes them.
    assert re.fullmatch(r"\d+\.\d+\.\d+(\.dev\d+)?", WRITTEN)


def test_the_changelog_describes_this_version() -> None:
    released = [version for version, _ in RELEASED.findall(CHANGELOG)]
    assert released, "CHANGELOG.md names no released version"
    assert released == sorted(released, key=_release, reverse=True), "released versions, newest first"
    if ".dev" in WRITTEN:
        # Changes not yet released are under Unreleased, above the last release, which this one follows.
        assert CHANGELOG.index("## [Unreleased]") < CHANGELOG.index(f"## [{released[0]}]")
        assert _release(WRITTEN) > _release(released[0])
    else:
        assert released[0] == WRITTEN


def test_each_released_version_names_the_commit_it_is() -> None:
    commits = re.findall(r"^## \[\d+\.\d+\.\d+\] - \S+\n\nCommit `([0-9a-f]{7,40})`\.", CHANGELOG, re.MULTILINE)
    assert len(commits) == len(RELEASED.findall(CHANGELOG))
    inside = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--git-dir"], capture_output=True, check=False)
    if inside.returncode != 0:
        pytest.skip("not a git checkout: the commits cannot be looked up")
    for commit in commits:
        found = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{commit}^{{commit}}"], check=False)
        assert found.returncode == 0, f"CHANGELOG.md names commit {commit}, which this history lacks"
