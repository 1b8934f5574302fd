"""What the witness shows: the executions of a call, and what ran (the tool and its arguments).

The witness is the kit's only evidence that the gated tool ran: a tool whose result lists the
executions (like the treasury's ``ledger``), or a command whose output does. An execution is a
JSON object that carries the call's nonce, with the call's arguments either flat (``{"op":
"wire_transfer", "to": ..., "amount": ...}``) or under ``arguments``, and optionally the tool's
name under ``tool``, ``op`` or ``name``. Where the witness shows plain text instead, executions
are counted by the nonce's occurrences and what ran cannot be compared.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Executions", "differences", "executions_in", "from_tool_result"]

#: Keys an execution record may name the tool under.
_TOOL_KEYS = ("tool", "op", "name")


@dataclass(frozen=True)
class Executions:
    """The executions of one call the witness shows: how many, and the records when it shows objects."""

    count: int
    records: list[dict[str, Any]] = field(default_factory=list)


def _parsed(text: str) -> Any:
    """``text`` as JSON, or as JSON lines, or itself when it is neither."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    lines = [line for line in text.splitlines() if line.strip()]
    values: list[Any] = []
    for line in lines:
        try:
            values.append(json.loads(line))
        except (ValueError, RecursionError):
            values.append(line)
    return values if lines else text


def _collect(value: Any, nonce: str, record: dict[str, Any] | None, found: list[Any]) -> None:
    """Append to ``found`` each record (the topmost object below the nearest list) holding ``nonce``;
    a string holding it outside any object counts once per occurrence."""
    if isinstance(value, dict):
        top = record if record is not None else value
        for item in value.values():
            _collect(item, nonce, top, found)
    elif isinstance(value, list):
        for item in value:
            _collect(item, nonce, None, found)
    elif isinstance(value, str) and nonce in value:
        if record is None:
            found.extend([value] * value.count(nonce))
        elif not any(item is record for item in found):
            found.append(record)


def executions_in(shown: Any, nonce: str) -> Executions:
    """The executions of the call with ``nonce`` in what a witness showed (text or JSON).

    Raises:
        RuntimeError: what it showed is nested too deep to read.
    """
    if isinstance(shown, str):
        shown = _parsed(shown)
    found: list[Any] = []
    try:
        _collect(shown, nonce, None, found)
    except RecursionError:
        raise RuntimeError("the witness showed values nested too deep to read") from None
    records = [item for item in found if isinstance(item, dict)]
    return Executions(len(found), records)


def from_tool_result(result: Mapping[str, Any], nonce: str) -> Executions:
    """The executions a witness tool's ``CallToolResult`` shows (its ``structuredContent``, else its text)."""
    structured = result.get("structuredContent")
    if structured is not None:
        return executions_in(structured, nonce)
    texts = [item.get("text", "") for item in result.get("content") or [] if isinstance(item, dict)]
    return executions_in([_parsed(text) for text in texts if isinstance(text, str)], nonce)


def _same(shown: Any, sent: Any) -> bool:
    """Equal as JSON values (a number equals the same number written otherwise: 30000 and 30000.0)."""
    if isinstance(sent, bool) or isinstance(shown, bool):
        return shown is sent
    if isinstance(sent, int | float) and isinstance(shown, int | float):
        return float(shown) == float(sent)
    if isinstance(sent, dict) and isinstance(shown, dict):
        return sent.keys() == shown.keys() and all(_same(shown[k], sent[k]) for k in sent)
    if isinstance(sent, list) and isinstance(shown, list):
        return len(sent) == len(shown) and all(_same(a, b) for a, b in zip(shown, sent, strict=True))
    return bool(type(shown) is type(sent) and shown == sent)


def differences(record: Mapping[str, Any], tool: str, arguments: Mapping[str, Any]) -> list[str]:
    """How an execution record differs from the call that was approved (empty: it ran as bound)."""
    nested = record.get("arguments")
    ran = nested if isinstance(nested, dict) else record
    found = []
    for key, sent in arguments.items():
        if key not in ran:
            found.append(f"no {key} (approved {json.dumps(sent)})")
        elif not _same(ran[key], sent):
            found.append(f"{key} {json.dumps(ran[key], default=str)} where {json.dumps(sent)} was approved")
    for key in _TOOL_KEYS:
        named = record.get(key)
        if key not in arguments and isinstance(named, str) and named != tool:
            found.append(f"the tool {named!r}, not {tool!r}")
            break
    return found
