"""``review approve --similar``'s options as a :class:`~mcp_approval.backends.SimilarRuleSpec`.

``--arg NAME=KIND:VALUE`` gives one argument's condition: ``equal:JSON`` (a JSON value, or the
text as given when it is not JSON), ``one-of:A,B,…`` (each item a JSON value or text),
``range:LOW..HIGH`` (numbers) or ``prefix:TEXT``. ``--for`` takes seconds, or a number with
``s``, ``m``, ``h`` or ``d``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from mcp_approval.backends import SimilarRuleSpec
from mcp_approval.errors import MCPApprovalError

__all__ = ["SimilarArgsError", "duration_s", "similar_spec"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd]?)$")


class SimilarArgsError(MCPApprovalError, ValueError):
    """An option of ``--similar`` is malformed; the message names the option."""


def duration_s(text: str) -> float:
    """``--for``: seconds, or a number with ``s``, ``m``, ``h`` or ``d``.

    Raises:
        SimilarArgsError: the text is not such a duration, or is zero.
    """
    found = _DURATION.match(text.strip())
    if found is None or float(found.group(1)) <= 0:
        raise SimilarArgsError(f"--for {text!r}: expected a positive duration such as 3600, 30m, 8h or 2d")
    return float(found.group(1)) * _UNITS[found.group(2) or "s"]


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _condition(option: str) -> tuple[str, dict[str, Any]]:
    name, sep, rest = option.partition("=")
    kind, colon, given = rest.partition(":")
    if not sep or not name or not colon:
        raise SimilarArgsError(f"--arg {option!r}: expected NAME=KIND:VALUE (equal, one-of, range, prefix)")
    if kind == "equal":
        return name, {"equal": _value(given)}
    if kind == "one-of":
        return name, {"one_of": [_value(item) for item in given.split(",")]}
    if kind == "range":
        low, dots, high = given.partition("..")
        try:
            bounds = [float(low), float(high)] if dots else None
        except ValueError:
            bounds = None
        if bounds is None:
            raise SimilarArgsError(f"--arg {option!r}: a range is LOW..HIGH, two numbers")
        return name, {"range": [int(b) if b.is_integer() else b for b in bounds]}
    if kind == "prefix":
        return name, {"prefix": given}
    raise SimilarArgsError(f"--arg {option!r}: unknown condition {kind!r}; expected equal, one-of, range or prefix")


def similar_spec(
    *, duration: str | None, uses: int | None, any_principal: bool, arguments: Sequence[str]
) -> SimilarRuleSpec:
    """The rule ``--for``, ``--uses``, ``--any-principal`` and ``--arg`` describe.

    Raises:
        SimilarArgsError: naming the option that is missing or malformed.
    """
    if duration is None:
        raise SimilarArgsError("--similar needs --for: how long the rule lasts (e.g. 8h)")
    if uses is None:
        raise SimilarArgsError("--similar needs --uses: how many later calls it may decide")
    conditions: dict[str, Any] = {}
    for option in arguments:
        name, condition = _condition(option)
        if name in conditions:
            raise SimilarArgsError(f"--arg {option!r}: argument {name!r} is given twice")
        conditions[name] = condition
    return SimilarRuleSpec(duration_s(duration), uses, not any_principal, conditions)
