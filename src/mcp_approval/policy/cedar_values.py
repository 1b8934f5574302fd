"""Mapping AuthZEN requests to Cedar entities and values (used by :class:`~mcp_approval.policy.cedar.CedarPDP`).

Request mapping (see :class:`EntityMapping`)
    - ``subject`` and ``resource`` become the Cedar principal and resource ``Type::"id"``, where
      ``Type`` is the AuthZEN ``type`` (renamed through ``EntityMapping.types``) under the
      optional ``namespace``: ``{"type": "user", "id": "alice"}`` is ``user::"alice"``, or
      ``Todo::user::"alice"`` with ``namespace="Todo"``.
    - ``action.name`` becomes ``Action::"name"`` (``Namespace::Action::"name"``).
    - ``subject.properties`` / ``resource.properties`` become the entity's attributes. An entity
      also present in the entities file keeps its stored attributes and parents; request
      properties only add attributes it does not have (the entity store wins).
    - ``context`` becomes the Cedar context; ``action.properties``, when present, appear as
      ``context.action_properties``.
    - JSON values map to Cedar values: ``null`` members are dropped (Cedar has no null), whole
      floats become Longs, other floats ``decimal`` values when Cedar can hold them exactly (at
      most four fractional digits) and strings otherwise. Objects with the Cedar JSON escape keys
      ``__entity``, ``__extn`` or ``__expr`` are refused, so request data cannot forge entity
      references.
    - So a number's Cedar type would follow its value (``30000`` a Long, ``1234.56`` a decimal),
      and no Cedar expression accepts both, ``EntityMapping.decimals`` names context members whose
      numbers are always ``decimal`` values, whole ones included: with
      ``decimals=("context.arguments.amount",)`` a policy reads
      ``context.arguments.amount.greaterThan(decimal("25000.0"))`` for any amount. A number there
      that Cedar cannot hold (more than four fractional digits, beyond the decimal range, not
      finite) makes the request invalid; other values are left as they are.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["EntityMapping", "to_cedar_record", "to_cedar_value"]

_IDENTIFIER = re.compile(r"^[_a-zA-Z][_a-zA-Z0-9]*$")
_RESERVED = frozenset({"true", "false", "if", "then", "else", "in", "is", "like", "has", "__cedar"})
_ESCAPE_KEYS = frozenset({"__entity", "__extn", "__expr"})
_I64 = (-(2**63), 2**63 - 1)
_DECIMAL_LIMIT = 922_337_203_685_477


@dataclass(frozen=True)
class EntityMapping:
    """How AuthZEN subjects, resources and actions name Cedar entities.

    Args:
        namespace: Cedar namespace prefixed to every entity type (``None``: no namespace).
        types: AuthZEN ``type`` → Cedar type name, for types that are not Cedar identifiers
            or should read differently in policy; other types are used as they are.
        action_type: the Cedar entity type of actions.
        action_properties_key: the context member that carries ``action.properties``.
        decimals: context members, written as policy reads them (``context.arguments.amount``),
            whose numbers become Cedar ``decimal`` values whatever their value.
    """

    namespace: str | None = None
    types: Mapping[str, str] = field(default_factory=dict)
    action_type: str = "Action"
    action_properties_key: str = "action_properties"
    decimals: Sequence[str] = ()

    def __post_init__(self) -> None:
        names = [self.action_type, *self.types.values()]
        if self.namespace:
            names.extend(self.namespace.split("::"))
        for name in names:
            _check_identifier(name)
        for path in self.decimals:
            check_decimal_path(path)

    def with_decimals(self, context: dict[str, Any], source: Mapping[str, Any]) -> dict[str, Any]:
        """``context`` (converted from ``source``) with the numbers at :attr:`decimals` as decimals.

        Raises:
            ValueError: a number there that Cedar's ``decimal`` cannot hold exactly, naming the path.
        """
        for path in self.decimals:
            members = path.split(".")[1:]
            parent: Any = source
            for member in members[:-1]:
                parent = parent.get(member) if isinstance(parent, Mapping) else None
            value = parent.get(members[-1]) if isinstance(parent, Mapping) else None
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            target = context
            for member in members[:-1]:
                target = target[member]
            target[members[-1]] = {"__extn": {"fn": "decimal", "arg": _decimal_text(value, path)}}
        return context

    def entity_type(self, authzen_type: str) -> str:
        """The Cedar entity type of an AuthZEN subject or resource ``type``."""
        name = self.types.get(authzen_type, authzen_type)
        _check_identifier(name)
        return self._qualified(name)

    def uid(self, authzen_type: str, entity_id: str) -> dict[str, str]:
        """The Cedar entity uid (JSON form) of an AuthZEN subject or resource."""
        return {"type": self.entity_type(authzen_type), "id": entity_id}

    def action_uid(self, name: str) -> dict[str, str]:
        """The Cedar action uid (JSON form) of an AuthZEN action name."""
        return {"type": self._qualified(self.action_type), "id": name}

    def _qualified(self, name: str) -> str:
        return f"{self.namespace}::{name}" if self.namespace else name


def check_decimal_path(path: str) -> None:
    """Check a :attr:`EntityMapping.decimals` entry: ``context.`` then dotted member names."""
    members = path.split(".")
    if len(members) < 2 or members[0] != "context" or not all(members[1:]):
        raise ValueError(f"{path!r}: a decimal member is written as policy reads it, e.g. 'context.arguments.amount'")


def _decimal_text(value: float, path: str) -> str:
    """``value`` as the argument of Cedar's ``decimal()``, or the ``ValueError`` saying why it cannot be."""
    text = f"{value}.0" if isinstance(value, int) else repr(value)
    if not re.fullmatch(r"-?\d+\.\d{1,4}", text) or abs(value) >= _DECIMAL_LIMIT:
        raise ValueError(f"{path} = {value!r}: not a decimal Cedar can hold (at most four fractional digits)")
    return text


def _check_identifier(name: str) -> None:
    if not _IDENTIFIER.match(name) or name in _RESERVED:
        raise ValueError(f"{name!r} is not a Cedar identifier; map it with EntityMapping.types")


def to_cedar_value(value: Any) -> Any:
    """Convert a JSON value to Cedar's JSON value form (see the module docstring)."""
    if isinstance(value, (bool, str)):  # a tuple is faster than a union here
        return value
    if isinstance(value, int):
        return value if _I64[0] <= value <= _I64[1] else str(value)
    if isinstance(value, float):
        return _float_value(value)
    if isinstance(value, Mapping):
        return to_cedar_record(value)
    if isinstance(value, list | tuple):
        return [to_cedar_value(item) for item in value if item is not None]
    raise ValueError(f"{type(value).__name__} is not a JSON value")


def to_cedar_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """Convert a JSON object to a Cedar record, dropping ``null`` members."""
    converted: dict[str, Any] = {}
    for key, member in record.items():
        if not isinstance(key, str):
            raise ValueError("record keys must be strings")
        if key in _ESCAPE_KEYS:
            raise ValueError(f"the member name {key!r} is reserved by Cedar")
        if member is not None:
            converted[key] = member if type(member) is str else to_cedar_value(member)
    return converted


def _float_value(value: float) -> Any:
    if math.isfinite(value) and value.is_integer() and _I64[0] <= value <= _I64[1]:
        return int(value)
    text = repr(value)
    if re.fullmatch(r"-?\d+\.\d{1,4}", text) and abs(value) < _DECIMAL_LIMIT:
        return {"__extn": {"fn": "decimal", "arg": text}}
    return text
