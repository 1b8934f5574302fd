"""Checking a call's arguments against the input schema its tool lists, before policy sees the call.

A call the tool would refuse must not become an approval request a reviewer could approve: the
policy gate answers it ``-32602`` naming the field instead. The message says which field and
which rule, never the value (arguments may be secrets, and error texts reach logs).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator

__all__ = ["InputSchemas", "SchemaCheck"]


class InputSchemas(Protocol):
    """The input schemas of the tools a server lists."""

    async def input_schema(self, tool: str) -> Mapping[str, Any] | None:
        """The ``inputSchema`` the server lists for ``tool`` (``None`` when it has no such tool)."""
        ...


class SchemaCheck:
    """Validates arguments against a tool's input schema (JSON Schema 2020-12 unless it names another).

    Validators are compiled once per tool and schema, and rebuilt when the tool's schema changes.
    """

    def __init__(self) -> None:
        self._validators: dict[str, tuple[str, Validator]] = {}

    def problem(self, tool: str, schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> str | None:
        """Why ``arguments`` do not match ``schema``, naming the field; ``None`` when they do."""
        from jsonschema.exceptions import best_match

        error = best_match(self._validator(tool, schema).iter_errors(dict(arguments)))
        return None if error is None else _described(tool, error)

    def _validator(self, tool: str, schema: Mapping[str, Any]) -> Validator:
        from jsonschema.validators import Draft202012Validator, validator_for

        key = json.dumps(schema, sort_keys=True, default=str)
        cached = self._validators.get(tool)
        if cached is not None and cached[0] == key:
            return cached[1]
        cls = validator_for(schema, default=Draft202012Validator)
        validator = cls(dict(schema))
        self._validators[tool] = (key, validator)
        return validator


def _described(tool: str, error: ValidationError) -> str:
    """The error in words: the field and the rule it breaks, without the value (which may be secret)."""
    if error.validator == "required" and isinstance(error.instance, Mapping):
        wanted = error.validator_value if isinstance(error.validator_value, Sequence) else ()
        missing = [name for name in wanted if isinstance(name, str) and name not in error.instance]
        if missing:
            return f"argument {_path(error.absolute_path, missing[0])!r} is required by the input schema of {tool}"
    if error.validator == "additionalProperties" and isinstance(error.instance, Mapping):
        known = error.schema.get("properties", {}) if isinstance(error.schema, Mapping) else {}
        extra = sorted(str(name) for name in error.instance if name not in known)
        if extra:
            return f"argument {_path(error.absolute_path, extra[0])!r} is not accepted by the input schema of {tool}"
    field = _path(error.absolute_path)
    where = f"argument {field!r}" if field else "the arguments"
    return f"{where} does not match the input schema of {tool} (rule {error.validator!r})"


def _path(parts: Sequence[str | int], last: str | None = None) -> str:
    names = [str(part) for part in parts] + ([last] if last is not None else [])
    return ".".join(name.encode("utf-8", "backslashreplace").decode("utf-8") for name in names)
