"""The console's "Approve, and approve similar calls" form: what it offers for a request, and the
similar-call rule a submitted form asks for.

The scope is chosen from what the request shows: the same requester or any, and per argument one
condition. An argument whose value the reviewer sees redacted offers none (it stays equal). A
number may be given a range, a string a prefix (pre-filled with the request's value), and any
value a list of values, one a line: strings as typed, numbers as numbers, other values as JSON.
The expiry and the use count are required and capped by the request's template; the backend
checks every one of these again (:meth:`~mcp_approval.backends.LocalApprovalBackend.approve_similar`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp_approval.backends import REDACTED, ApprovalRecord, SimilarRuleError, SimilarRuleSpec

__all__ = ["UNITS", "SimilarArgument", "SimilarForm", "similar_form", "spec_of_form"]

#: The units the expiry may be given in, and their length in seconds.
UNITS = {"minutes": 60, "hours": 3600, "days": 86_400}
#: The most form fields one argument adds (its condition and the inputs of each kind).
FIELDS_PER_ARGUMENT = 5


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class SimilarArgument:
    """One argument of the form: what the request shows, and what the reviewer chose for it."""

    index: int
    name: str
    shown: str
    redacted: bool
    number: bool
    string: bool
    kind: str = "equal"
    one_of: str = ""
    low: str = ""
    high: str = ""
    prefix: str = ""

    @property
    def field(self) -> str:
        """The prefix of its form fields (``a0``, ``a1``…): names that no argument name can disturb."""
        return f"a{self.index}"


@dataclass(frozen=True)
class SimilarForm:
    """The form as a request's page shows it."""

    max_s: float
    max_uses_cap: int
    arguments: tuple[SimilarArgument, ...]
    principal: str = "same"
    expires_in: str = ""
    unit: str = "hours"
    max_uses: str = ""
    comment: str = ""

    @property
    def max_text(self) -> str:
        """The longest a rule may last, for people (``8 hours``)."""
        seconds = self.max_s
        for unit, length in reversed(UNITS.items()):
            if seconds >= length and seconds % length == 0:
                count = int(seconds // length)
                return f"{count} {unit if count != 1 else unit[:-1]}"
        return f"{seconds:g} seconds"

    @property
    def field_count(self) -> int:
        """How many fields a submission of this form may hold."""
        return 10 + FIELDS_PER_ARGUMENT * len(self.arguments)


def similar_form(
    record: ApprovalRecord, limits: tuple[float, int], submitted: Mapping[str, str] | None = None
) -> SimilarForm:
    """The form for ``record`` (arguments as the reviewer sees them), filled with ``submitted`` if given."""
    given = submitted or {}
    arguments = []
    for index, (name, value) in enumerate(record.arguments.items()):
        shown = REDACTED if value == REDACTED else json.dumps(value, ensure_ascii=False, sort_keys=True)
        field = f"a{index}"
        arguments.append(
            SimilarArgument(
                index=index,
                name=name,
                shown=shown,
                redacted=value == REDACTED,
                number=_is_number(value),
                string=isinstance(value, str) and value != REDACTED,
                kind=given.get(field, "equal"),
                one_of=given.get(f"{field}.one_of", value if isinstance(value, str) else shown),
                low=given.get(f"{field}.low", shown if _is_number(value) else ""),
                high=given.get(f"{field}.high", shown if _is_number(value) else ""),
                prefix=given.get(f"{field}.prefix", value if isinstance(value, str) else ""),
            )
        )
    return SimilarForm(
        max_s=limits[0],
        max_uses_cap=limits[1],
        arguments=tuple(arguments),
        principal=given.get("principal", "same"),
        expires_in=given.get("expires_in", ""),
        unit=given.get("unit", "hours"),
        max_uses=given.get("max_uses", ""),
        comment=given.get("comment", ""),
    )


def spec_of_form(form: SimilarForm, record: ApprovalRecord) -> SimilarRuleSpec:
    """The rule the submitted ``form`` asks for on ``record``.

    Raises:
        SimilarRuleError: naming the field that is missing, malformed or above the template's limits.
    """
    if form.unit not in UNITS:
        raise SimilarRuleError("Choose the expiry's unit: minutes, hours or days.")
    expires = _number(form.expires_in, "The expiry")
    if expires is None or expires <= 0:
        raise SimilarRuleError("An expiry is required: how long the rule lasts, more than zero.")
    expires_s = expires * UNITS[form.unit]
    if expires_s > form.max_s:
        raise SimilarRuleError(f"A rule of this template lasts at most {form.max_text}.")
    uses_text = form.max_uses.strip()
    if not (uses_text.isascii() and uses_text.isdigit()) or len(uses_text) > 9 or int(uses_text) < 1:
        raise SimilarRuleError("The number of uses is required: a whole number of at least 1.")
    if int(uses_text) > form.max_uses_cap:
        raise SimilarRuleError(f"A rule of this template decides at most {form.max_uses_cap} calls.")
    if form.principal not in ("same", "any"):
        raise SimilarRuleError("Choose whose calls the rule decides: the same requester, or any.")
    values = list(record.arguments.values())
    conditions = {
        argument.name: condition
        for argument in form.arguments
        if (condition := _condition(argument, values[argument.index])) is not None
    }
    return SimilarRuleSpec(expires_s, int(uses_text), form.principal == "same", conditions)


def _condition(argument: SimilarArgument, value: Any) -> object | None:
    """The condition the reviewer chose for one argument (``None``: it stays equal)."""
    where = f"Argument {argument.name!r}"
    if argument.kind == "equal":
        return None
    if argument.redacted:
        raise SimilarRuleError(f"{where} is redacted: it can only stay equal.")
    if argument.kind == "one_of":
        lines = [line.rstrip("\r") for line in argument.one_of.split("\n")]
        chosen = [_value_of(line, value, where) for line in lines if line.strip()]
        if not chosen:
            raise SimilarRuleError(f"{where}: list the values it may take, one a line.")
        return {"one_of": chosen}
    if argument.kind == "range":
        if not argument.number:
            raise SimilarRuleError(f"{where} is not a number: it takes no range.")
        low, high = _number(argument.low, f"{where}'s lowest value"), _number(argument.high, f"{where}'s highest value")
        if low is None or high is None:
            raise SimilarRuleError(f"{where}: a range needs its lowest and its highest value.")
        return {"range": [low, high]}
    if argument.kind == "prefix":
        if not argument.string:
            raise SimilarRuleError(f"{where} is not a string: it takes no prefix.")
        if not argument.prefix:
            raise SimilarRuleError(f"{where}: a prefix cannot be empty.")
        return {"prefix": argument.prefix}
    raise SimilarRuleError(f"{where}: choose equal, one of, a range or a prefix.")


def _value_of(line: str, shown: Any, where: str) -> Any:
    """One line of a ``one of`` list, read as the kind of value the request shows."""
    if isinstance(shown, str):
        return line
    if _is_number(shown):
        number = _number(line, f"{where}'s value {line.strip()!r}")
        if number is None:
            raise SimilarRuleError(f"{where}: {line.strip()!r} is not a number.")
        return number
    try:
        return json.loads(line)
    except ValueError:
        raise SimilarRuleError(f"{where}: {line.strip()!r} is not a JSON value.") from None


def _number(text: str, what: str) -> int | float | None:
    """A finite number written in ``text`` (``None`` when it is empty)."""
    text = text.strip()
    if not text:
        return None
    try:
        number: int | float = int(text) if text.lstrip("-").isdigit() and len(text) < 19 else float(text)
    except ValueError:
        raise SimilarRuleError(f"{what} must be a number, not {text[:40]!r}.") from None
    if not math.isfinite(number):
        raise SimilarRuleError(f"{what} must be a finite number.")
    return number
