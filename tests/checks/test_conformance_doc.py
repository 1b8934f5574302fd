"""``docs/conformance.md`` matches the kit: its scenario tables, the statements it cannot observe, its
worked command and its output."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from mcp_approval.checks import SCENARIOS
from mcp_approval.checks.client_scenarios import CLIENT_SCENARIOS

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "conformance.md"


def words(command: str) -> list[str]:
    """A shell command block as its words (continuations joined)."""
    return [word for word in command.split() if word != "\\"]


def section(text: str, title: str) -> str:
    start = text.index(f"## {title}")
    following = text.find("\n## ", start + 1)
    return text[start : following if following != -1 else len(text)]


def yaml_ids() -> list[str]:
    found: list[str] = []
    for name in ("sep-2848.yaml", "sep-2643.yaml", "sep-2663.yaml"):
        text = (ROOT / "conformance" / name).read_text()
        found += re.findall(r"^  - check: (\S+)$", text, re.MULTILINE)
    return found


def test_the_tables_list_every_scenario_with_its_statement_ids_in_order() -> None:
    rows = re.findall(r"^\| `([a-z][a-z-]+)` \| ([^|]+) \|", DOC.read_text(), re.MULTILINE)
    listed = [(scenario, re.findall(r"`(sep-[0-9a-z-]+)`", ids)) for scenario, ids in rows]
    kit_rows = [row for row in listed if row[0] in {s.id for s in SCENARIOS}]
    assert kit_rows == [(scenario.id, list(scenario.checks)) for scenario in SCENARIOS]
    assert [row for row in listed if row[0].startswith("client-")] == [
        (scenario, list(checks)) for scenario, checks, *_ in CLIENT_SCENARIOS
    ]


def test_every_statement_is_checked_or_listed_as_unobservable_with_a_reason() -> None:
    text = section(DOC.read_text(), "Statements the kit cannot observe")
    unobservable = dict(re.findall(r"^\| `(sep-[0-9a-z-]+)` \| (.+) \|$", text, re.MULTILINE))
    checked = {check for scenario in SCENARIOS for check in scenario.checks}
    checked |= {check for _, checks, *_ in CLIENT_SCENARIOS for check in checks}
    assert all(reason.strip() for reason in unobservable.values())
    assert not set(unobservable) & checked, sorted(set(unobservable) & checked)
    everything = yaml_ids()
    assert set(everything) == checked | set(unobservable), (
        sorted(set(everything) - checked - set(unobservable)),
        sorted((checked | set(unobservable)) - set(everything)),
    )
    assert len(unobservable) < len(everything) / 3  # most of the SEPs can be seen from outside


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
    output = section(text, "A worked run: the treasury example")
    lines = re.findall(r"^(PASS|FAIL|SKIP) ([a-z-]+) \[", output, re.MULTILINE)
    assert [scenario for _, scenario in lines] == [scenario.id for scenario in SCENARIOS]
    skipped = sum(1 for outcome, _ in lines if outcome == "SKIP")
    assert f"{len(SCENARIOS) - skipped} passed, 0 failed, {skipped} skipped" in output
    assert "cleanup: nothing the run opened is pending" in output
