"""What the demo prints: one line per step while it runs, a summary table at the end, or JSON.

The JSON form (``mcp-approval demo --json``) is a list with one object per scenario, keys in
this order: ``scenario`` (int), ``name`` (str), ``outcome`` (``"pass"`` or ``"fail"``),
``disposition`` (the ``io.modelcontextprotocol/tool-approval-disposition`` the client read, or
``null`` when the call ended without one), ``executions`` (ledger entries the scenario's calls
left, read from the ledger file), ``detail`` (one line: what happened, or what went wrong) and
``seconds`` (wall time, 2 decimals).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rich.console import Console
from rich.markup import escape
from rich.table import Table

__all__ = ["Narrator", "Outcome", "ScenarioResult", "results_json"]

Outcome = Literal["pass", "fail"]
#: Terminal width from which the summary table also shows each scenario's detail.
WIDE_TABLE_COLUMNS = 120


@dataclass(frozen=True)
class ScenarioResult:
    """How one scenario went; the fields, in order, are the JSON object's keys."""

    scenario: int
    name: str
    outcome: Outcome
    disposition: str | None
    executions: int
    detail: str
    seconds: float

    def as_json(self) -> dict[str, object]:
        """The JSON object, keys in the documented order."""
        return {
            "scenario": self.scenario,
            "name": self.name,
            "outcome": self.outcome,
            "disposition": self.disposition,
            "executions": self.executions,
            "detail": self.detail,
            "seconds": self.seconds,
        }


def results_json(results: Sequence[ScenarioResult]) -> str:
    """The ``--json`` document."""
    return json.dumps([result.as_json() for result in results], indent=2, ensure_ascii=False)


class Narrator:
    """Narrates steps on a rich console; silent when ``console`` is ``None`` (the ``--json`` mode)."""

    def __init__(self, console: Console | None) -> None:
        self.console = console
        self._mark = time.perf_counter()

    def _print(self, text: str) -> None:
        if self.console is not None:
            self.console.print(text, highlight=False)

    def banner(self, text: str) -> None:
        """A line outside any scenario."""
        self._print(f"[bold]{escape(text)}[/]")

    def info(self, text: str) -> None:
        """A dim line outside any scenario (where servers run, where the store is)."""
        self._print(f"[dim]{escape(text)}[/]")

    def scenario(self, number: int, name: str, expectation: str) -> None:
        """The heading of a scenario."""
        self._print(f"\n[bold cyan]{number:>2}. {escape(name)}[/] [dim]— {escape(expectation)}[/]")
        self.restart_clock()

    def restart_clock(self) -> None:
        """Measure the next step from now."""
        self._mark = time.perf_counter()

    def _elapsed(self) -> str:
        ms = (time.perf_counter() - self._mark) * 1000
        self._mark = time.perf_counter()
        return f"[dim]({ms:.0f} ms)[/]"

    def call(self, who: str, what: str) -> None:
        """A request going out: ``→ alice tools/call wire_transfer {...}``."""
        self.restart_clock()
        self._print(f"   [blue]→[/] [bold]{escape(who)}[/] {escape(what)}")

    def got(self, what: str) -> None:
        """What came back, timed from the matching :meth:`call`."""
        self._print(f"   [magenta]←[/] {escape(what)} {self._elapsed()}")

    def decided(self, who: str, decision: str) -> None:
        """A reviewer's (or resolver's, or the deadline's) decision."""
        self._print(f"   [yellow]⚖[/] decided by [bold]{escape(who)}[/]: {escape(decision)} {self._elapsed()}")

    def note(self, text: str) -> None:
        """Something the demo did that is not a request (a kill, a restart)."""
        self._print(f"   [dim]•[/] {escape(text)} {self._elapsed()}")

    def check(self, ok: bool, text: str) -> None:
        """One expectation checked."""
        mark = "[green]✓[/]" if ok else "[red]✗[/]"
        self._print(f"   {mark} {escape(text)}")

    def outcome(self, result: ScenarioResult) -> None:
        """The scenario's verdict line."""
        colour = "green" if result.outcome == "pass" else "red"
        disposition = result.disposition or "no disposition"
        self._print(
            f"   [{colour}]{result.outcome.upper()}[/] {escape(disposition)}, "
            f"{result.executions} execution(s), {result.seconds:.2f} s — {escape(result.detail)}"
        )

    def summary(self, results: Sequence[ScenarioResult], total_s: float) -> None:
        """The final table."""
        if self.console is None:
            return
        passed = sum(result.outcome == "pass" for result in results)
        table = Table(title=f"mcp-approval demo: {passed}/{len(results)} scenarios behaved in {total_s:.1f} s")
        # A narrow terminal gets the details in the narration above, not squeezed into the table.
        wide = self.console.width >= WIDE_TABLE_COLUMNS
        # Only names and details may wrap: an 80-column terminal still shows every number and disposition whole.
        table.add_column("#", justify="right", no_wrap=True, min_width=2)
        table.add_column("scenario", overflow="fold")
        table.add_column("outcome", no_wrap=True)
        table.add_column("disposition", no_wrap=True, min_width=len("denied-not-executed"))
        table.add_column("runs", justify="right", no_wrap=True)
        table.add_column("s", justify="right", no_wrap=True)
        if wide:
            table.add_column("detail", overflow="fold")
        for result in results:
            colour = "green" if result.outcome == "pass" else "red"
            cells = [
                str(result.scenario),
                escape(result.name),
                f"[{colour}]{result.outcome}[/]",
                escape(result.disposition or "—"),
                str(result.executions),
                f"{result.seconds:.2f}",
            ]
            table.add_row(*cells, *((escape(result.detail),) if wide else ()))
        self.console.print()
        self.console.print(table)
