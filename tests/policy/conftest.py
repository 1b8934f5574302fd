"""Paths of the policy fixtures: the AuthZEN Todo example and its published interop decisions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TODO_EXAMPLE = ROOT / "examples" / "authzen-todo"
TODO_POLICY = TODO_EXAMPLE / "todo.cedar"
TODO_ENTITIES = TODO_EXAMPLE / "entities.json"
TODO_SCHEMA = TODO_EXAMPLE / "todo.cedarschema"
#: The OpenID AuthZEN Todo decision set (see the example's README for its source).
INTEROP_DECISIONS = TODO_EXAMPLE / "decisions-authorization-api-1_0-02.json"


def interop_decisions() -> dict[str, list[dict[str, Any]]]:
    """The published AuthZEN Todo decisions (part of the checkout, so never skipped)."""
    decisions: dict[str, list[dict[str, Any]]] = json.loads(INTEROP_DECISIONS.read_text(encoding="utf-8"))
    return decisions
