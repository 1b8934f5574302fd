#!/usr/bin/env python3
"""Print the client x step table of the framework legs' results files.

Usage: table.py RESULTS_FILE...

Each file is one client's ``{"client", "steps": {step: "PASS"|"FAIL"}}`` (harness.Leg.finish); a
missing or unreadable file is a client whose leg did not finish (every step FAIL). Columns are the
steps in the order they first appear; a step a client does not run shows "-".
Exit status: 0 when every step of every client passed, 1 otherwise.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def load(path: Path) -> tuple[str, dict[str, str]]:
    """One client's name and step verdicts; a leg that wrote nothing is one failed "ran" step."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        return str(document["client"]), {str(k): str(v) for k, v in document["steps"].items()}
    except (OSError, ValueError, KeyError):
        return path.stem, {"ran": "FAIL"}


def render(rows: list[tuple[str, dict[str, str]]]) -> str:
    """The table, one line per client."""
    columns: list[str] = []
    for _, steps in rows:
        columns.extend(step for step in steps if step not in columns)
    width = max([len("client"), *(len(client) for client, _ in rows)])
    widths = [max(len(column), 4) for column in columns]
    lines = ["  ".join([f"{'client':<{width}}", *(f"{c:<{w}}" for c, w in zip(columns, widths, strict=True))])]
    lines.append("-" * len(lines[0]))
    for client, steps in rows:
        cells = [f"{steps.get(column, '-'):<{w}}" for column, w in zip(columns, widths, strict=True)]
        lines.append("  ".join([f"{client:<{width}}", *cells]))
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Print the table; 1 when any step failed or no results were given."""
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    rows = [load(Path(arg)) for arg in argv[1:]]
    print(render(rows))
    failed = sum(verdict != "PASS" for _, steps in rows for verdict in steps.values())
    return 1 if failed or not rows else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
