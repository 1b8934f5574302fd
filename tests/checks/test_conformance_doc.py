"""``docs/conformance.md`` matches the kit: its scenario table, its worked command and its output."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from mcp_approval.checks import SCENARIOS
from mcp_approval.checks.client_scenarios import CLIENT_SCENARIOS

DOC = Path(__file__).resolve().parents[2] / "docs" / "conformance.md"


def words(command: str) -> list[str]:
    """A shell command block as its words (continuations joined)."""
    return [word for word in command.split() if word != "\\"]


def test_the_tables_list_every_scenario_with_its_statement_ids_in_order() -> None:
    rows = re.findall(r"^\| `([a-z][a-z-]+)` \| ([^|]+) \|", DOC.read_text(), re.MULTILINE)
    listed = [(scenario, re.findall(r"`(sep-[0-9a-z-]+)`", ids)) for scenario, ids in rows]
    assert [row for row in listed if not row[0].startswith("client-")] == [
        (scenario.id, list(scenario.checks)) for scenario in SCENARIOS
    ]
    assert [row for row in listed if row[0].startswith("client-")] == [
        (scenario, list(checks)) for scenario, checks, *_ in CLIENT_SCENARIOS
    ]


def test_the_worked_run_is_the_one_check_help_shows_and_its_output_names_every_scenario() -> None:
    text = DOC.read_text()
    (worked,) = [block for block in re.findall(r"```bash\n(.*?)```", text, re.DOTALL) if "mcp-approval check" in block]
    shown = subprocess.run(
        [sys.executable, "-m", "mcp_approval", "check", "--help"],
        capture_output=True,
        text=True,
        check=True,
        env={"COLUMNS": "200", "TERM": "dumb", "PATH": ""},
    ).stdout
    example = shown[shown.index("mcp-approval check http") : shown.index("--report check-report.json") + 26]
    assert words(re.sub(r"\s*│\s*", " ", example)) == words(worked)
    lines = re.findall(r"^(PASS|FAIL|SKIP) ([a-z-]+) \[", text, re.MULTILINE)
    assert [scenario for _, scenario in lines][: len(SCENARIOS)] == [scenario.id for scenario in SCENARIOS]
    assert f"{len(SCENARIOS) - 2} passed, 0 failed, 2 skipped" in text  # input and expiry: not configured
