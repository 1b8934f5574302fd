"""From an MCP ``tools/call`` to an AuthZEN Access Evaluation request.

Default mapping (COAZ-MCP style)::

    subject  = {"type": "user", "id": <authenticated principal>}
    action   = {"name": "tools/call"}
    resource = {"type": "tool", "id": <tool name>}
    context  = {"arguments": <call arguments>, "client": <client info, when known>}

Per-tool :class:`ToolRule` overrides change the action name, take the resource from the
call's arguments (e.g. the repository a ``delete_repo`` call names), add resource properties
taken from arguments, or keep the arguments out of the context. When the resource is not the
tool itself, the tool name is still visible to policy as ``context.tool``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from mcp_approval.errors import MCPApprovalError
from mcp_approval.policy.models import Context, EvaluationRequest
from mcp_approval.protocol import METHOD_TOOLS_CALL

__all__ = ["TOOLS_CALL_ACTION", "ToolCallMapper", "ToolMappingError", "ToolRule", "argument_at"]

TOOLS_CALL_ACTION: Final = METHOD_TOOLS_CALL  # the AuthZEN action names the MCP method
_MISSING: Final = object()


class ToolMappingError(MCPApprovalError, ValueError):
    """A call cannot be mapped: an argument a rule reads is missing or of the wrong type.

    The caller must deny the call (there is nothing to authorize it against).
    """


def argument_at(arguments: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted ``path`` in ``arguments`` (``repo``, ``target.id``, ``items.0.name``).

    Raises :class:`ToolMappingError` when the path does not lead to a value.
    """
    value: Any = arguments
    for part in path.split("."):
        if isinstance(value, Mapping):
            value = value.get(part, _MISSING)
        elif isinstance(value, Sequence) and not isinstance(value, str) and part.isdigit():
            index = int(part)
            value = value[index] if index < len(value) else _MISSING
        else:
            value = _MISSING
        if value is _MISSING:
            raise ToolMappingError(f"argument {path!r} is missing")
    return value


#: The largest integer magnitude JSON peers agree on (RFC 8785 and I-JSON refuse anything beyond it).
MAX_SAFE_INTEGER: Final = 2**53 - 1


def unrepresentable_argument(arguments: Mapping[str, Any]) -> str | None:
    """Why ``arguments`` cannot be decided and sealed faithfully, naming the field; ``None`` when they can.

    JSON has no ``NaN`` or infinite numbers (Python's parser accepts them); integers beyond
    ±(2^53 - 1) and strings with lone surrogates (``"\\ud800"``) have no exact canonical form
    (RFC 8785), so nothing downstream could hash, compare or store them faithfully. The message
    names the field by its dotted path and never quotes the value.
    """
    pending: list[tuple[str, Any, Any]] = [(_shown(str(key)), key, value) for key, value in arguments.items()]
    while pending:
        path, key, value = pending.pop()
        problem = _scalar_problem(key, value)
        if problem is not None:
            return f"argument {path!r} {problem}"
        if isinstance(value, Mapping):
            pending.extend((f"{path}.{_shown(str(name))}", name, member) for name, member in value.items())
        elif isinstance(value, list | tuple):
            pending.extend((f"{path}.{index}", index, item) for index, item in enumerate(value))
    return None


def _scalar_problem(key: Any, value: Any) -> str | None:
    if isinstance(key, str) and _has_lone_surrogate(key):
        return "has a name with a lone surrogate (not valid Unicode)"
    if isinstance(value, float) and not math.isfinite(value):
        return "is not a finite number"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_SAFE_INTEGER:
        return "is an integer outside ±(2^53 - 1), which JSON cannot carry exactly"
    if isinstance(value, str) and _has_lone_surrogate(value):
        return "is a string with a lone surrogate (not valid Unicode)"
    return None


def _has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _shown(name: str) -> str:
    """``name`` safe to quote in an error message (a lone surrogate becomes ``\\udXXX``)."""
    return name.encode("utf-8", "backslashreplace").decode("utf-8")


def _identifier(value: Any, path: str) -> str:
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise ToolMappingError(f"argument {path!r} must be a non-empty string or an integer to name a resource")


@dataclass(frozen=True)
class ToolRule:
    """How one tool's calls are mapped, where it differs from the defaults.

    Args:
        action: the action name (default: the mapper's ``action``, ``tools/call``).
        resource_type: the resource type (default: the mapper's ``resource_type``, ``tool``).
        resource_id: a fixed resource id.
        resource_id_from: the argument path whose value is the resource id.
        resource_properties_from: resource property name → argument path (missing paths are an error).
        include_arguments: put the call's arguments into ``context.arguments``.
    """

    action: str | None = None
    resource_type: str | None = None
    resource_id: str | None = None
    resource_id_from: str | None = None
    resource_properties_from: Mapping[str, str] = field(default_factory=dict)
    include_arguments: bool = True

    def __post_init__(self) -> None:
        if self.resource_id is not None and self.resource_id_from is not None:
            raise ValueError("ToolRule takes resource_id or resource_id_from, not both")


_DEFAULT_RULE: Final = ToolRule()


class ToolCallMapper:
    """Maps ``tools/call`` requests to AuthZEN evaluation requests.

    Args:
        subject_type: the AuthZEN subject type of authenticated principals.
        action: the default action name.
        resource_type: the default resource type (the resource id is the tool name).
        rules: per-tool overrides, by tool name.
    """

    def __init__(
        self,
        *,
        subject_type: str = "user",
        action: str = TOOLS_CALL_ACTION,
        resource_type: str = "tool",
        rules: Mapping[str, ToolRule] | None = None,
    ) -> None:
        self.subject_type = subject_type
        self.action = action
        self.resource_type = resource_type
        self.rules: Mapping[str, ToolRule] = dict(rules or {})

    def rule_for(self, tool: str) -> ToolRule:
        """The rule of ``tool`` (the defaults when it has none)."""
        return self.rules.get(tool) or _DEFAULT_RULE

    def map_call(
        self,
        *,
        principal: str,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        client: Mapping[str, Any] | None = None,
        subject_properties: Mapping[str, Any] | None = None,
        extra_context: Mapping[str, Any] | None = None,
    ) -> EvaluationRequest:
        """The evaluation request for one call by ``principal``.

        ``client`` (e.g. ``{"name": ..., "version": ...}`` from the MCP client info) becomes
        ``context.client``; ``extra_context`` members are added to the context last and must not
        collide with the mapped ones. Raises :class:`ToolMappingError` when a rule cannot be applied.
        """
        if not principal:
            raise ToolMappingError("an authenticated principal is required")
        rule = self.rule_for(tool)
        args = dict(arguments or {})
        resource = self._resource(tool, rule, args)
        context: Context = {}
        if rule.include_arguments:
            context["arguments"] = args
        if client:
            context["client"] = dict(client)
        if resource["type"] != self.resource_type or resource["id"] != tool:
            context["tool"] = tool
        for key, value in (extra_context or {}).items():
            if key in context:
                raise ToolMappingError(f"extra context member {key!r} collides with a mapped member")
            context[key] = value
        # One validation of the whole request (cheaper than validating each member model in turn).
        return EvaluationRequest.model_validate(
            {
                "subject": {
                    "type": self.subject_type,
                    "id": principal,
                    "properties": dict(subject_properties) if subject_properties else None,
                },
                "action": {"name": rule.action or self.action},
                "resource": resource,
                "context": context,
            }
        )

    def _resource(self, tool: str, rule: ToolRule, args: Mapping[str, Any]) -> dict[str, Any]:
        """The request's ``resource`` member (validated with the rest of the request)."""
        if rule.resource_id_from is not None:
            resource_id = _identifier(argument_at(args, rule.resource_id_from), rule.resource_id_from)
        else:
            resource_id = rule.resource_id or tool
        properties = {name: argument_at(args, path) for name, path in rule.resource_properties_from.items()}
        return {
            "type": rule.resource_type or self.resource_type,
            "id": resource_id,
            "properties": properties or None,
        }
