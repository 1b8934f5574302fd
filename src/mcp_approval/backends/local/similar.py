"""Similar-call rules: what a reviewer approving one request lets decide later calls like it.

A *similar-call rule* is written by a reviewer while approving a request ("approve this, and
calls like it"). Its scope is chosen from what that request shows: the same tool and template;
the same principal or any; and for each argument of the request one condition (equal to the
value shown, one of several values, a number within a range, a string with a prefix). An argument
the reviewer names no condition for must equal the value shown, and a later call must carry the
same argument names: a rule never reaches a call with an argument its author did not see.

These are not a template's decision rules (:mod:`~mcp_approval.backends.local.rules`: who
decides, how many approvals); a similar-call rule only ever approves one later request at a time,
as an automatic decision that the server re-evaluates against current policy like any approval.

This module is pure: the scope, its matching, and what of a rule is sealed. Storing rules,
consuming their uses and deciding requests by them is :mod:`~mcp_approval.backends.local.similar_store`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from mcp_approval.backends.local.errors import ReviewError

__all__ = [
    "RULE_ACTOR_PREFIX",
    "ArgumentCondition",
    "SimilarCallScope",
    "SimilarRuleError",
    "rule_actor",
    "rule_of_actor",
]

#: The reviewer name a similar-call rule's decisions are recorded under: ``similar-rule:<rule id>``.
RULE_ACTOR_PREFIX = "similar-rule:"
#: The conditions an argument may be given.
_KINDS = ("equal", "one_of", "range", "prefix")
#: The most values a ``one_of`` condition lists.
_MAX_ONE_OF = 100


class SimilarRuleError(ReviewError):
    """A similar-call rule was refused: a scope that does not fit its request, a template that
    forbids rules, an expiry or use count out of bounds, an unknown or ended rule."""


def rule_actor(rule_id: str) -> str:
    """The reviewer name the decisions of rule ``rule_id`` are recorded under."""
    return RULE_ACTOR_PREFIX + rule_id


def rule_of_actor(actor: str | None) -> str | None:
    """The rule id a decision's reviewer name stands for, or ``None`` (a person, a resolver)."""
    if actor is None or not actor.startswith(RULE_ACTOR_PREFIX):
        return None
    return actor[len(RULE_ACTOR_PREFIX) :]


def _is_number(value: object) -> bool:
    # bool is an int subclass; a flag is never an amount.
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class ArgumentCondition:
    """The condition one argument of a later call must meet.

    Attributes:
        kind: ``equal`` (the JSON value ``value``), ``one_of`` (one of ``values``), ``range``
            (a number from ``low`` to ``high``, both included) or ``prefix`` (a string starting with ``value``).
    """

    kind: str
    value: Any = None
    values: tuple[Any, ...] = ()
    low: float | None = None
    high: float | None = None

    def admits(self, argument: object) -> bool:
        """Whether ``argument`` meets the condition (values compare as canonical JSON: 1 is not true)."""
        if self.kind == "equal":
            return _canonical(argument) == _canonical(self.value)
        if self.kind == "one_of":
            return any(_canonical(argument) == _canonical(value) for value in self.values)
        if self.kind == "range":
            low, high = self.low, self.high
            return _is_number(argument) and low is not None and high is not None and low <= argument <= high  # type: ignore[operator]
        return isinstance(argument, str) and isinstance(self.value, str) and argument.startswith(self.value)

    def to_json(self) -> dict[str, Any]:
        """The condition as stored: ``{"equal": v}``, ``{"one_of": [...]}``, ``{"range": [lo, hi]}``
        or ``{"prefix": s}``."""
        if self.kind == "one_of":
            return {"one_of": list(self.values)}
        if self.kind == "range":
            return {"range": [self.low, self.high]}
        return {self.kind: self.value}

    @classmethod
    def from_json(cls, name: str, document: object) -> ArgumentCondition:
        """The condition :meth:`to_json` wrote (or a reviewer sent).

        Raises:
            SimilarRuleError: naming the argument and what is wrong with its condition.
        """
        where = f"scope of argument {name!r}"
        if not isinstance(document, dict) or len(document) != 1:
            raise SimilarRuleError(f"{where}: expected one of {', '.join(_KINDS)} (an object with one member)")
        ((kind, given),) = document.items()
        if kind == "equal":
            return cls("equal", value=given)
        if kind == "one_of":
            if not isinstance(given, list) or not 1 <= len(given) <= _MAX_ONE_OF:
                raise SimilarRuleError(f"{where}: one_of needs a list of 1 to {_MAX_ONE_OF} values")
            return cls("one_of", values=tuple(given))
        if kind == "range":
            if not isinstance(given, list) or len(given) != 2 or not all(_is_number(v) for v in given):
                raise SimilarRuleError(f"{where}: range needs [low, high], two finite numbers")
            low, high = given
            if low > high:
                raise SimilarRuleError(f"{where}: range low {low} is above high {high}")
            return cls("range", low=low, high=high)
        if kind == "prefix":
            if not isinstance(given, str) or not given:
                raise SimilarRuleError(f"{where}: prefix needs a non-empty string")
            return cls("prefix", value=given)
        raise SimilarRuleError(f"{where}: unknown condition {kind!r}; expected one of {', '.join(_KINDS)}")


@dataclass(frozen=True)
class SimilarCallScope:
    """Which later calls a similar-call rule decides.

    Attributes:
        tool: the tool, as the approved request named it.
        template: the approval template of the approved request (``None``: the default one).
        principal: the only requester it decides for, or ``None`` for any requester.
        arguments: one condition per argument of the approved request.
    """

    tool: str
    template: str | None
    principal: str | None
    arguments: Mapping[str, ArgumentCondition]

    @classmethod
    def chosen(
        cls,
        *,
        tool: str,
        template: str | None,
        requester: str,
        arguments: Mapping[str, Any],
        same_principal: bool,
        conditions: Mapping[str, object],
    ) -> SimilarCallScope:
        """The scope a reviewer chose from a request (its ``tool``, ``template``, ``requester``,
        ``arguments``); an argument without a condition in ``conditions`` must stay equal.

        Raises:
            SimilarRuleError: a condition names an argument the request does not have, is malformed,
                or does not admit the request's own value (a scope always contains what was approved).
        """
        unknown = sorted(set(conditions) - set(arguments))
        if unknown:
            raise SimilarRuleError(f"the request has no argument {unknown[0]!r} to scope")
        chosen: dict[str, ArgumentCondition] = {}
        for name, value in arguments.items():
            if name in conditions:
                condition = ArgumentCondition.from_json(name, conditions[name])
            else:
                condition = ArgumentCondition("equal", value=value)
            if not condition.admits(value):
                shown = _canonical(value)[:80]
                raise SimilarRuleError(f"scope of argument {name!r} does not admit the request's own value {shown}")
            chosen[name] = condition
        return cls(tool, template, requester if same_principal else None, chosen)

    def why_outside(
        self, *, tool: str, template: str | None, requester: str, arguments: Mapping[str, Any]
    ) -> str | None:
        """Why a call is outside this scope, or ``None`` when it is inside."""
        if tool != self.tool:
            return f"tool {tool!r} is not {self.tool!r}"
        if template != self.template:
            return "another approval template"
        if self.principal is not None and requester != self.principal:
            return "another principal"
        if set(arguments) != set(self.arguments):
            return "other argument names"
        for name, condition in self.arguments.items():
            if not condition.admits(arguments[name]):
                return f"argument {name!r} outside its scope"
        return None

    def to_text(self) -> str:
        """The scope as canonical JSON text (stored, and sealed, with its rule)."""
        document = {
            "tool": self.tool,
            "template": self.template,
            "principal": self.principal,
            "arguments": {name: condition.to_json() for name, condition in self.arguments.items()},
        }
        return _canonical(document)

    @classmethod
    def from_text(cls, text: str) -> SimilarCallScope:
        """The scope :meth:`to_text` wrote.

        Raises:
            SimilarRuleError: the text is not such a document.
        """
        try:
            document: Any = json.loads(text)
            arguments = {
                name: ArgumentCondition.from_json(name, condition) for name, condition in document["arguments"].items()
            }
            scope = cls(document["tool"], document["template"], document["principal"], arguments)
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            raise SimilarRuleError(f"unreadable similar-call scope ({exc})") from None
        return scope

    def describe(self, hidden: Collection[str] = ()) -> str:
        """One line for people: the tool, the principal, each argument's condition (the values of
        ``hidden`` arguments, those reviewers see redacted, as ``[redacted]``)."""
        who = self.principal if self.principal is not None else "any principal"
        parts = [
            f"{name} = [redacted]" if name in hidden else f"{name} {_describe(condition)}"
            for name, condition in sorted(self.arguments.items())
        ]
        return f"{self.tool} by {who}" + (f" where {', '.join(parts)}" if parts else "")


def _describe(condition: ArgumentCondition) -> str:
    if condition.kind == "equal":
        return f"= {_canonical(condition.value)}"
    if condition.kind == "one_of":
        return "in " + _canonical(list(condition.values))
    if condition.kind == "range":
        return f"in [{condition.low}, {condition.high}]"
    return f"starts with {_canonical(condition.value)}"
