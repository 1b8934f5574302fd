"""Startup checks: a deployment that cannot work is refused before it serves a call.

Each check takes what it inspects and raises :class:`~mcp_approval.config.ConfigError` with one
line, ``FILE:LINE: key: message``, naming where the problem is:

- :func:`check_requestable_templates`: every ``@requestable("t")`` names a configured
  ``[templates.t]`` (otherwise its requests would have no reviewers the deployment chose).
- :func:`check_policy_tools` and :func:`check_entity_tools`: every ``tool::"name"`` the policy or
  the entities name is a tool the server has (an entity of the tool type that is another entity's
  parent is a group of tools, not a tool).
- :func:`call_register`: the tools module's ``register`` accepts ``(server, settings, base_dir)``,
  and an exception it raises becomes one line naming the file and line it was raised from.

:func:`validate_deployment` runs the policy checks a deployment file calls for;
:func:`check_library_templates` and :func:`check_library_tools` run the same checks for a server
built in code (``Approvals``), against the backend's templates and the server's tools.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import cedarpy
from mcp.server.mcpserver import MCPServer

from mcp_approval.backends import SupportsTemplates
from mcp_approval.config import ConfigError, DeploymentConfig
from mcp_approval.policy import CedarPDP, PolicyDecisionPoint, ToolCallMapper
from mcp_approval.policy.cedar_loading import ANNOTATION_REQUESTABLE, entity_items
from mcp_approval.policy.source import Statement, TextSource, find_line, split_statements

__all__ = [
    "call_register",
    "check_entity_tools",
    "check_library_templates",
    "check_library_tools",
    "check_policy_tools",
    "check_requestable_templates",
    "registered_tools",
    "tool_groups",
    "validate_deployment",
    "validate_deployment_templates",
]


def validate_deployment(config: DeploymentConfig, server: MCPServer[Any], pdp: PolicyDecisionPoint) -> None:
    """Refuse a deployment whose policy names templates or tools it does not have.

    Call it once ``server`` has its tools. A remote PDP's policy is not visible here, and an
    ARAP backend's templates live at its Access Request Service: those checks are skipped.

    Raises:
        ConfigError: ``FILE:LINE: key: message`` for the first problem found.
    """
    policy = config.policy
    source = validate_deployment_templates(config, pdp)
    if source is None or not isinstance(pdp, CedarPDP):
        return
    entities = TextSource.read(config.resolve(policy.entities)) if policy.entities is not None else None
    _check_tools(source, entities, registered_tools(server), tool_type=_tool_type(pdp))


def validate_deployment_templates(config: DeploymentConfig, pdp: PolicyDecisionPoint) -> TextSource | None:
    """The template check of :func:`validate_deployment`, which needs no server: when
    ``Approvals``' own check (:func:`check_library_templates`, which names the backend's templates)
    refuses a deployment, this one says the same in terms of the file's ``[templates.t]``.

    Returns the policy it read (``None`` when its policy is not visible here).

    Raises:
        ConfigError: naming the policy file, the annotation's line and the missing ``[templates.t]``.
    """
    if not isinstance(pdp, CedarPDP) or config.policy.cedar is None:
        return None
    source = TextSource.read(config.resolve(config.policy.cedar))
    if config.approval.backend == "local":
        check_requestable_templates(source, config.templates, config_path=config.path)
    return source


def check_library_templates(pdp: PolicyDecisionPoint, backend: object) -> None:
    """For a server built in code: every ``@requestable("t")`` of a Cedar policy names a template
    of the local backend (the check :func:`validate_deployment` makes against ``[templates]``).

    Skipped for a PDP whose policy is not visible (not a :class:`CedarPDP`) and for a backend
    whose templates are not configured here (not
    :class:`~mcp_approval.backends.capabilities.SupportsTemplates`: an ARAP backend's templates
    live at its Access Request Service).

    Raises:
        ConfigError: naming the policy file, the annotation's line and the missing template.
    """
    if isinstance(pdp, CedarPDP) and isinstance(backend, SupportsTemplates):
        check_requestable_templates(pdp.policy_source, backend.templates.keys())


def check_library_tools(pdp: PolicyDecisionPoint, server: MCPServer[Any]) -> None:
    """For a server built in code, once its tools are registered: every tool a Cedar policy or
    its entities name is one of ``server``'s tools (the checks :func:`validate_deployment` makes).

    Raises:
        ConfigError: naming the policy or entities file, the line and the unknown tool.
    """
    if isinstance(pdp, CedarPDP):
        _check_tools(pdp.policy_source, pdp.entities_source, registered_tools(server), tool_type=_tool_type(pdp))


def _tool_type(pdp: CedarPDP) -> str:
    return pdp.mapping.entity_type(ToolCallMapper().resource_type)


def _check_tools(policy: TextSource, entities: TextSource | None, tools: frozenset[str], *, tool_type: str) -> None:
    groups: frozenset[str] = frozenset()
    if entities is not None:
        check_entity_tools(entities, tools, tool_type=tool_type)
        groups = tool_groups(entities, tool_type=tool_type)
    check_policy_tools(policy, tools, tool_type=tool_type, groups=groups)


def check_requestable_templates(
    policy: TextSource, templates: Collection[str], *, config_path: Path | None = None
) -> None:
    """Every ``@requestable("t")`` in ``policy`` names one of ``templates``.

    ``@requestable`` without a template (or with ``""``) uses the backend's default template.
    ``config_path`` is the file whose ``[templates]`` are checked; without it, the templates
    given to a ``LocalApprovalBackend`` in code.

    Raises:
        ConfigError: naming the policy file, the annotation's line and the missing template.
    """
    for statement, body in _policies(policy):
        template = (body.get("annotations") or {}).get(ANNOTATION_REQUESTABLE)
        if not template or template in templates:
            continue
        line = find_line(policy.text, [f"@{ANNOTATION_REQUESTABLE}"], statement.first_line, statement.last_line)
        configured = ", ".join(sorted(templates)) or "none"
        missing = (
            f"no [templates.{template}] in {config_path}"
            if config_path is not None
            else f"no ApprovalTemplate named {template!r} in the LocalApprovalBackend's templates"
        )
        raise ConfigError(
            f'{policy.name}:{line or statement.first_line}: @requestable("{template}"): {missing} '
            f"to say who decides its requests (configured: {configured})"
        )


def check_policy_tools(
    policy: TextSource, tools: Collection[str], *, tool_type: str = "tool", groups: Collection[str] = ()
) -> None:
    """Every ``tool_type::"name"`` entity ``policy`` names is one of ``tools`` (or one of ``groups``).

    Raises:
        ConfigError: naming the policy file, the line and the unknown tool.
    """
    for statement, body in _policies(policy):
        for uid in _entity_uids(body):
            name = uid["id"]
            if uid["type"] != tool_type or name in tools or name in groups:
                continue
            literal = f"{tool_type}::{json.dumps(name)}"
            line = find_line(policy.text, [literal], statement.first_line, statement.last_line)
            raise ConfigError(f"{policy.name}:{line or statement.first_line}: {literal}: {_no_tool(tools)}")


def check_entity_tools(entities: TextSource, tools: Collection[str], *, tool_type: str = "tool") -> None:
    """Every entity of ``tool_type`` in ``entities`` is one of ``tools``, or a group of them.

    Raises:
        ConfigError: naming the entities file, the entity's line and the unknown tool.
    """
    groups = tool_groups(entities, tool_type=tool_type)
    for line, entity in entity_items(entities):
        for uid in _entity_uids(entity):
            name = uid["id"]
            if uid["type"] != tool_type or name in tools or name in groups:
                continue
            raise ConfigError(f"{entities.name}:{line}: {tool_type}::{json.dumps(name)}: {_no_tool(tools)}")


def tool_groups(entities: TextSource, *, tool_type: str = "tool") -> frozenset[str]:
    """Ids of ``tool_type`` entities that are another entity's parent: groups of tools, not tools."""
    return frozenset(
        parent["id"]
        for _, entity in entity_items(entities)
        for parent in entity.get("parents") or ()
        if isinstance(parent, Mapping) and parent.get("type") == tool_type and isinstance(parent.get("id"), str)
    )


def registered_tools(server: MCPServer[Any]) -> frozenset[str]:
    """The names of the tools registered on ``server``.

    ``MCPServer.list_tools`` is a coroutine that never suspends; it is run to completion here so
    that the check works inside or outside an event loop.
    """
    listing = server.list_tools()
    try:
        listing.send(None)
    except StopIteration as done:
        return frozenset(tool.name for tool in done.value)
    listing.close()
    raise RuntimeError("MCPServer.list_tools suspended; registered tools cannot be listed at startup")


def call_register(
    register: Callable[..., object], server: MCPServer[Any], settings: dict[str, Any], base_dir: Path
) -> None:
    """Call a tools module's ``register(server, settings, base_dir)``, checking its signature first.

    Raises:
        ConfigError: ``register`` does not accept those three arguments, is async, or raised
            (naming its file, the line it was raised from, and the exception).
    """
    file, first_line = _where_defined(register)
    try:
        inspect.signature(register).bind(server, settings, base_dir)
    except TypeError as exc:
        shown = _parameter_names(register)
        raise ConfigError(
            f"{file}:{first_line}: register{shown}: must accept (server, settings, base_dir): {exc}"
        ) from None
    except ValueError:
        pass  # no signature to inspect (a builtin): the call below says what is wrong
    if inspect.iscoroutinefunction(register):
        raise ConfigError(f"{file}:{first_line}: register: must be a plain function (it is async, so it would not run)")
    try:
        register(server, settings, base_dir)
    except Exception as exc:
        line = _raising_line(exc.__traceback__, file) or first_line
        raise ConfigError(f"{file}:{line}: register: raised {type(exc).__name__}: {exc}") from exc


def _no_tool(tools: Collection[str]) -> str:
    known = ", ".join(sorted(tools)) or "none"
    return f"the server has no such tool (its tools: {known})"


def _policies(policy: TextSource) -> Iterator[tuple[Statement, Mapping[str, Any]]]:
    """Each policy (and policy template) of a loaded policy file with its statement, in file order."""
    est = json.loads(cedarpy.policies_to_json_str(policy.text))
    bodies = {**est.get("templates", {}), **est.get("staticPolicies", {})}
    for statement in split_statements(policy.text):
        body = bodies.get(statement.policy_id)
        if body is not None:
            yield statement, body


def _entity_uids(value: Any) -> Iterator[Mapping[str, str]]:
    """Every entity uid (``{"type": ..., "id": ...}`` of two strings) inside a JSON value."""
    if isinstance(value, Mapping):
        if isinstance(value.get("type"), str) and isinstance(value.get("id"), str):
            yield value
        for item in value.values():
            yield from _entity_uids(item)
    elif isinstance(value, list):
        for item in value:
            yield from _entity_uids(item)


def _where_defined(function: Callable[..., object]) -> tuple[str, int]:
    code = getattr(inspect.unwrap(function), "__code__", None)
    if code is None:
        return "<register>", 1
    return code.co_filename, code.co_firstlineno


def _parameter_names(function: Callable[..., object]) -> str:
    """``(server, settings)``: the signature without annotations or defaults."""
    return "(" + ", ".join(_parameter_name(p) for p in inspect.signature(function).parameters.values()) + ")"


def _parameter_name(parameter: inspect.Parameter) -> str:
    if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
        return "*" + parameter.name
    if parameter.kind is inspect.Parameter.VAR_KEYWORD:
        return "**" + parameter.name
    return parameter.name


def _raising_line(trace: TracebackType | None, file: str) -> int | None:
    """The line in ``file`` closest to where the exception was raised."""
    line = None
    while trace is not None:
        if trace.tb_frame.f_code.co_filename == file:
            line = trace.tb_lineno
        trace = trace.tb_next
    return line
