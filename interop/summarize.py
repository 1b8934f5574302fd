#!/usr/bin/env python3
"""Summarise conformance-suite results: one table row per scenario, then one summary line.

Usage: summarize.py RESULTS_DIR LEG_LABEL

RESULTS_DIR holds (at any depth) the ``<side>-<scenario>-<timestamp>/checks.json`` directories the
suite writes with ``-o``. Check statuses are counted as passed (SUCCESS), failed (FAILURE),
warnings (WARNING) and skipped (SKIPPED); INFO checks are informational and not counted.
Exit status: 0 when no check failed, 1 otherwise, 2 when no results were found.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

_RUN_DIR = re.compile(r"^(?:server|client)-(?P<scenario>.+)-(?P<stamp>\d{4}-\d{2}-\d{2}T[\d-]+Z)$")
_COUNTED = {"SUCCESS": "passed", "FAILURE": "failed", "WARNING": "warnings", "SKIPPED": "skipped"}


@dataclass
class Row:
    """Check counts of one scenario run."""

    scenario: str
    stamp: str
    passed: int = 0
    failed: int = 0
    warnings: int = 0
    skipped: int = 0


def load_rows(results: Path) -> list[Row]:
    """One row per ``checks.json`` under ``results``, in run order."""
    rows = []
    for checks_file in results.rglob("checks.json"):
        match = _RUN_DIR.match(checks_file.parent.name)
        scenario, stamp = (match["scenario"], match["stamp"]) if match else (checks_file.parent.name, "")
        row = Row(scenario, stamp)
        for check in json.loads(checks_file.read_text(encoding="utf-8")):
            field = _COUNTED.get(str(check.get("status")))
            if field is not None:
                setattr(row, field, getattr(row, field) + 1)
        rows.append(row)
    return sorted(rows, key=lambda row: (row.stamp, row.scenario))


def render(rows: list[Row]) -> str:
    """The per-scenario table."""
    width = max([len("scenario"), *(len(row.scenario) for row in rows)])
    lines = [f"  {'scenario':<{width}}  passed  failed  warnings  skipped", "  " + "-" * (width + 34)]
    for row in rows:
        mark = "✗" if row.failed else " "
        lines.append(
            f"{mark} {row.scenario:<{width}}  {row.passed:>6}  {row.failed:>6}  {row.warnings:>8}  {row.skipped:>7}"
        )
    return "\n".join(lines)


def summary(label: str, rows: list[Row]) -> str:
    """The one-line leg summary."""
    failing = [row.scenario for row in rows if row.failed]
    skipped = [row for row in rows if row.skipped and not (row.passed or row.failed or row.warnings)]
    totals = {field: sum(getattr(row, field) for row in rows) for field in _COUNTED.values()}
    line = (
        f"[{label}] scenarios: {len(rows) - len(failing) - len(skipped)} passed, {len(failing)} failed, "
        f"{len(skipped)} skipped; "
        f"checks: {totals['passed']} passed, {totals['failed']} failed, "
        f"{totals['warnings']} warnings, {totals['skipped']} skipped"
    )
    return line + (f"; failing: {', '.join(failing)}" if failing else "")


def main(argv: list[str]) -> int:
    """Print the table and the summary line for one leg."""
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    rows = load_rows(Path(argv[1]))
    if not rows:
        print(f"[{argv[2]}] no checks.json found under {argv[1]}")
        return 2
    print(render(rows))
    print(summary(argv[2], rows))
    return 1 if any(row.failed for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
