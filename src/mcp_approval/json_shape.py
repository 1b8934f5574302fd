"""How big a JSON value is: its members and its depth, counted without recursion and within a budget.

A value an attacker sent (tool arguments, a request context) is sized up before anything costly is
done with it: :func:`json_shape` stops once past a budget, and :func:`large_json` says whether a
value is large enough to be processed on a worker thread (:func:`mcp_approval.worker_thread.off_loop`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

__all__ = ["LARGE_JSON_MEMBERS", "JsonShape", "json_shape", "large_json"]

#: Values with more members than this are processed off the event loop (see :func:`large_json`).
LARGE_JSON_MEMBERS: Final = 512


@dataclass(frozen=True)
class JsonShape:
    """How big a parsed JSON value is, as far as :func:`json_shape` looked.

    Attributes:
        members: object members plus array items, at every level.
        depth: the deepest nesting of objects and arrays (``{}`` is 1, a scalar 0).
        complete: ``False`` when the walk stopped early because a budget was exceeded.
    """

    members: int
    depth: int
    complete: bool = True


def json_shape(value: Any, *, max_members: int | None = None, max_depth: int | None = None) -> JsonShape:
    """Count the members and the depth of ``value`` iteratively, stopping once past either budget.

    The walk costs at most ``max_members`` steps, so a caller can size up an attacker's value
    before doing anything expensive with it.
    """
    members = 0
    deepest = 0
    pending: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, dict | list) else []
    while pending:
        item, depth = pending.pop()
        deepest = max(deepest, depth)
        children = item.values() if isinstance(item, dict) else item
        members += len(children)
        if (max_members is not None and members > max_members) or (max_depth is not None and depth > max_depth):
            return JsonShape(members, deepest, complete=False)
        pending.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return JsonShape(members, deepest)


def large_json(value: Any) -> bool:
    """Whether ``value`` has more than :data:`LARGE_JSON_MEMBERS` members (a bounded look)."""
    return not json_shape(value, max_members=LARGE_JSON_MEMBERS).complete
