"""Paths of the policy fixtures: the AuthZEN Todo example and the shared interop decisions."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: The read-only reference folder beside the checkout (CI lays it there); overridable.
SHARED = Path(os.environ.get("MCP_APPROVAL_SHARED_DIR", ROOT.parent / "shared"))
TODO_EXAMPLE = ROOT / "examples" / "authzen-todo"
TODO_POLICY = TODO_EXAMPLE / "todo.cedar"
TODO_ENTITIES = TODO_EXAMPLE / "entities.json"
TODO_SCHEMA = TODO_EXAMPLE / "todo.cedarschema"
INTEROP_DECISIONS = SHARED / "data" / "authzen-interop" / "todo-decisions-authorization-api-1_0-02.json"


def interop_decisions() -> dict[str, list[dict[str, Any]]]:
    """The published AuthZEN Todo decisions; skipped (failed in CI) when the shared folder is absent."""
    if not INTEROP_DECISIONS.is_file():
        message = f"AuthZEN interop decisions not found at {INTEROP_DECISIONS}; set MCP_APPROVAL_SHARED_DIR"
        if os.environ.get("MCP_APPROVAL_REQUIRE_SERVICES") == "1":
            pytest.fail(message, pytrace=False)
        pytest.skip(message, allow_module_level=True)
    decisions: dict[str, list[dict[str, Any]]] = json.loads(INTEROP_DECISIONS.read_text(encoding="utf-8"))
    return decisions
