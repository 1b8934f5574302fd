"""Scenario outcomes: one PASS/FAIL/SKIP line each with its evidence, and the JSON report.

Everything printed passes through :func:`~mcp_approval.safe_text.terminal_text`, and what a
server sent never starts a line of its own: a hostile server cannot colour, move or fake a line
of the report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from mcp_approval.errors import MCPApprovalError
from mcp_approval.safe_text import terminal_text

__all__ = [
    "CheckResult",
    "Failed",
    "Outcome",
    "RunSummary",
    "Skipped",
    "StopRun",
    "exit_code",
    "format_result",
    "format_summary",
    "line",
    "report_json",
]

Outcome = Literal["PASS", "FAIL", "SKIP"]


class Failed(MCPApprovalError):
    """The server broke the scenario's statement; the message says how."""


class Skipped(MCPApprovalError):
    """The scenario does not apply to this server or run; the message says why."""


class StopRun(Failed):
    """A failure after which the kit calls the server no more (the gated tool ran without approval,
    or an answer did not come in time): the message is the run's verdict."""

    def __init__(self, verdict: str, *, calls_only: bool = True) -> None:
        super().__init__(verdict)
        #: Only scenarios that call the gated tool stop (else every scenario does).
        self.calls_only = calls_only


@dataclass
class CheckResult:
    """One scenario's outcome, the SEP statement ids it checks, what the kit saw, and its notes."""

    scenario: str
    checks: tuple[str, ...]
    statement: str
    outcome: Outcome
    detail: str
    evidence: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
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
            "notes": list(self.notes),
            "seconds": round(self.seconds, 3),
        }


@dataclass
class RunSummary:
    """What the run did besides its scenarios: the verdict that stopped it, what did not run, the cleanup."""

    verdict: str | None = None
    not_run: list[str] = field(default_factory=list)
    cleanup: list[str] = field(default_factory=list)
    preflight: list[str] = field(default_factory=list)


def line(text: str) -> str:
    """``text`` as one line safe for a terminal: its newlines shown as ``\\n``, every control escaped."""
    return terminal_text(text.replace("\r", "\\r").replace("\n", "\\n"))


def format_result(result: CheckResult) -> str:
    """``PASS scenario [ids]`` then the statement, the detail, the notes and the evidence, indented."""
    ids = ", ".join(result.checks) or "no statement id"
    lines = [f"{result.outcome} {result.scenario} [{ids}]", f"    statement: {line(result.statement)}"]
    lines.append(f"    {'why' if result.outcome != 'PASS' else 'result'}: {line(result.detail)}")
    lines.extend(f"    note: {line(item)}" for item in result.notes)
    lines.extend(f"    evidence: {line(item)}" for item in result.evidence)
    return "\n".join(lines)


def format_summary(results: list[CheckResult], summary: RunSummary) -> str:
    """The closing lines: the cleanup, and the counts."""
    lines = [f"cleanup: {line(item)}" for item in summary.cleanup]
    counts = {outcome: sum(1 for r in results if r.outcome == outcome) for outcome in ("PASS", "FAIL", "SKIP")}
    tally = f"{counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped"
    if summary.not_run:
        tally += f", {len(summary.not_run)} not run"
    lines.append(tally)
    return "\n".join(lines)


def report_json(url: str, results: list[CheckResult], summary: RunSummary | None = None) -> dict[str, Any]:
    """The whole run: the server, the counts, every scenario, and what stopped or cleaned up the run."""
    summary = summary or RunSummary()
    counts = {outcome: sum(1 for r in results if r.outcome == outcome) for outcome in ("PASS", "FAIL", "SKIP")}
    return {
        "server": url,
        "passed": counts["PASS"],
        "failed": counts["FAIL"],
        "skipped": counts["SKIP"],
        "verdict": summary.verdict,
        "not_run": list(summary.not_run),
        "preflight": list(summary.preflight),
        "cleanup": list(summary.cleanup),
        "scenarios": [result.to_json() for result in results],
    }


def exit_code(results: list[CheckResult]) -> int:
    """0 only when every scenario that ran passed."""
    return 1 if any(result.outcome == "FAIL" for result in results) else 0
