#!/usr/bin/env python3
"""A ``--decide`` command for this project's deployments: ``review_decider.py CONFIG REVIEWER``.

Decides, as ``mcp-approval review`` does on the deployment file CONFIG, the one pending request
of the call the environment names (``MCP_CHECK_DECISION``, ``MCP_CHECK_TOOL``,
``MCP_CHECK_ARGUMENTS``, ``MCP_CHECK_COMMENT``), as REVIEWER. Prints the request id and exits 0;
exits 75 when no such request is pending (yet), 1 when the decision is refused. The interop leg
of the suite module (scripts/interop.sh m) decides through it, as any operator's decider would.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import typer

from mcp_approval.cli.review import decide_matching

NOT_YET = 75


def main() -> int:
    config, reviewer = Path(sys.argv[1]), sys.argv[2]
    decision = os.environ["MCP_CHECK_DECISION"]
    if decision not in ("approve", "deny"):
        print(f"unknown decision {decision!r}", file=sys.stderr)
        return 1
    arguments = json.loads(os.environ["MCP_CHECK_ARGUMENTS"])
    comment = os.environ.get("MCP_CHECK_COMMENT") or None
    try:
        found = decide_matching(config, os.environ["MCP_CHECK_TOOL"], arguments, reviewer, decision, comment=comment)
    except typer.Exit as exc:
        return 1 if exc.exit_code == 0 else exc.exit_code
    if found is None:
        print("no such pending request", file=sys.stderr)
        return NOT_YET
    print(found)
    return 0


if __name__ == "__main__":
    sys.exit(main())
