"""Paths of the policy fixtures: the AuthZEN Todo example and the shared interop decisions."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TODO_EXAMPLE = ROOT / "examples" / "authzen-todo"
TODO_POLICY = TODO_EXAMPLE / "todo.cedar"
TODO_ENTITIES = TODO_EXAMPLE / "entities.json"
TODO_SCHEMA = TODO_EXAMPLE / "todo.cedarschema"
INTEROP_DECISIONS = ROOT.parent / "shared" / "data" / "authzen-interop" / "todo-decisions-authorization-api-1_0-02.json"
