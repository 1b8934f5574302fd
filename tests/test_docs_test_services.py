"""The README and docs/development.md name the variables tests/conftest.py reads to find the
PostgreSQL and Redis servers, and their example commands set exactly those."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: What tests/conftest.py reads (checked against its text below).
VARIABLES = {"MCP_APPROVAL_TEST_POSTGRES_URL", "MCP_APPROVAL_TEST_REDIS_URL", "MCP_APPROVAL_REQUIRE_SERVICES"}


def test_conftest_reads_the_documented_variables() -> None:
    read = set(re.findall(r'os\.environ\.get\("(MCP_APPROVAL_[A-Z_]+)"', (ROOT / "tests" / "conftest.py").read_text()))
    assert read == VARIABLES


@pytest.mark.parametrize("page", ["README.md", "docs/development.md"])
def test_the_page_shows_how_to_point_the_tests_at_other_servers(page: str) -> None:
    text = (ROOT / page).read_text(encoding="utf-8")
    blocks = [block for block in re.findall(r"```bash\n(.*?)```", text, re.DOTALL) if "MCP_APPROVAL_TEST_" in block]
    assert len(blocks) == 1, page
    assigned = set(re.findall(r"^(MCP_APPROVAL_[A-Z_]+)=", blocks[0], re.MULTILINE))
    assert assigned == VARIABLES


def test_ci_runs_the_postgresql_demo_on_the_tests_server() -> None:
    """CI's PostgreSQL demo is the test's: on the server the tests are pointed at, none of its own."""
    demo_test = (ROOT / "tests" / "demo" / "test_demo_postgres.py").read_text(encoding="utf-8")
    assert re.search(r'run_demo\("--json", "--db", postgres_url\b', demo_test)
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "demo --json --db" not in script  # one run on PostgreSQL, not a second of CI's own
    (tests_step,) = re.findall(r"^bash scripts/test .*$", script, re.MULTILINE)
    assert [word for word in ("tests/demo", "--ignore", " -k ", "--deselect") if word in tests_step] == []
