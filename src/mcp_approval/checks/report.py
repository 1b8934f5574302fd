"""Scenario outcomes: one PASS/FAIL/SKIP line each with its evidence, and the JSON report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Failed", "Outcome", "ScenarioResult", "Skipped", "exit_code", "format_result", "report_json"]

Outcome = Literal["PASS", "FAIL", "SKIP"]


class Failed(Exception):
    """The server broke the scenario's statement; the message says how."""


class Skipped(Exception):
    """The scenario does not apply to this server or run; the message says why."""


@dataclass
class ScenarioResult:
    """One scenario's outcome, the SEP statement ids it checks and what the kit saw."""

    scenario: str
    checks: tuple[str, ...]
    statement: str
    outcome: Outcome
    detail: str
    evidence: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """The scenario as one object of the JSON report."""
        return {
            "scenario": self.scenario,
            "checks": list(self.checks),
            "statement": self.statement,
            "outcome": self.outcome,
            "detail": self.detail,
            "evidence": list(self.evidence),
            "seconds": round(self.seconds, 3),
        }


def format_result(result: ScenarioResult) -> str:
    """``PASS scenario [ids] statement`` then the detail and evidence, indented."""
    ids = ", ".join(result.checks) or "no statement id"
    lines = [f"{result.outcome} {result.scenario} [{ids}]", f"    statement: {result.statement}"]
    lines.append(f"    {'why' if result.outcome != 'PASS' else 'result'}: {result.detail}")
    lines.extend(f"    evidence: {item}" for item in result.evidence)
    return "\n".join(lines)


def report_json(url: str, results: list[ScenarioResult]) -> dict[str, Any]:
    """The whole run: the server, the counts and every scenario."""
    counts = {outcome: sum(1 for r in results if r.outcome == outcome) for outcome in ("PASS", "FAIL", "SKIP")}
    return {
        "server": url,
        "passed": counts["PASS"],
        "failed": counts["FAIL"],
        "skipped": counts["SKIP"],
        "scenarios": [result.to_json() for result in results],
    }


def exit_code(results: list[ScenarioResult]) -> int:
    """0 only when every scenario that ran passed."""
    return 1 if any(result.outcome == "FAIL" for result in results) else 0
