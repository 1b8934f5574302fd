"""``PolicyGate``: the policy enforcement point in front of every ``tools/call``.

The gate is an SDK :class:`~mcp.server.mcpserver.Extension` whose ``intercept_tool_call`` maps
the call to an AuthZEN request (:class:`~mcp_approval.policy.ToolCallMapper`), asks the PDP
afresh on every call, and then:

=====================================  ==========================================================
decision                               answer
=====================================  ==========================================================
permit                                 ``call_next(ctx)``: the rest of the chain (e.g. the tasks
                                       interceptor) and the tool
deny, requestable (ARAP)               the :class:`RequestableHandler` seam; by default
                                       :class:`DegradedRequestable` (``undisclosed`` + guidance)
deny, ``authorization_details``        SEP-2643 case 3: ``available`` + ``authorization_remediation``
deny, ``missing_scopes``               ``undisclosed`` naming the scopes (HTTP challenges for
                                       per-tool scopes belong to :mod:`mcp_approval.denials.http`)
deny, ``next_action: retry``           ``undisclosed``: try again later
any other deny, PDP failure,           ``unavailable``; the tool is never called
unmappable call
(no such tool)                         ``Unknown tool: NAME``, as the SDK answers it, before policy
                                       runs (when the gate is given ``tool_exists``)
=====================================  ==========================================================

Install it first, so it is the outermost interceptor::

    gate = PolicyGate(CedarPDP.from_files("policy.cedar"))
    server = MCPServer("demo", extensions=[gate, tasks])
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import mcp_types as types
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Extension
from mcp.shared.exceptions import MCPError

from mcp_approval.approval.call.input_schema import InputSchemas, SchemaCheck
from mcp_approval.approval.call.limits import argument_limit_problem
from mcp_approval.approval.options import ApprovalOptions
from mcp_approval.denials import (
    AuthorizationReferences,
    Remediation,
    Shortfall,
    credential_remediation,
    final_denial,
    new_context_id,
    note_retry,
    remediation_for,
    shortfall_result,
)
from mcp_approval.json_shape import large_json
from mcp_approval.policy import Decision, EvaluationRequest, NextAction, PolicyDecisionPoint, ToolCallMapper
from mcp_approval.policy.mapping import ToolMappingError, unrepresentable_argument
from mcp_approval.protocol import DENIALS_EXTENSION, INVALID_PARAMS, META_CLIENT_INFO
from mcp_approval.tasks.options import PrincipalLookup
from mcp_approval.tasks.server import LOCAL_PRINCIPAL
from mcp_approval.tracing import Span, span
from mcp_approval.worker_thread import off_loop

__all__ = [
    "ANONYMOUS_MESSAGE",
    "CONTEXT_AUTHORIZATION_DETAILS",
    "CONTEXT_MISSING_SCOPES",
    "CONTEXT_SINGLE_USE",
    "CREDENTIAL_MESSAGE",
    "PDP_FAILURE_MESSAGE",
    "RETRY_MESSAGE",
    "UNAVAILABLE_MESSAGE",
    "UNKNOWN_TOOL_MESSAGE",
    "DegradedRequestable",
    "GatedCall",
    "PolicyGate",
    "RequestableHandler",
    "ToolExists",
    "token_subject",
]

logger = logging.getLogger("mcp_approval.approval")


def token_subject(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The access token's subject (else its client id); in-process and stdio callers are the local principal.

    Anonymous HTTP callers have none. Unlike the SDK's session-binding principal (a JSON
    triple), this is the bare identity a policy names, e.g. ``alice``.
    """
    token = get_access_token()
    if token is not None:
        return token.subject or token.client_id
    return LOCAL_PRINCIPAL if ctx.request is None else None


#: Decision-context member with the RFC 9396 details a new credential must carry.
CONTEXT_AUTHORIZATION_DETAILS = "authorization_details"
#: Decision-context member: whether a credential for those details is meant for one use (default true).
CONTEXT_SINGLE_USE = "single_use"
#: Decision-context member with the OAuth scopes the caller's credential lacks.
CONTEXT_MISSING_SCOPES = "missing_scopes"

UNAVAILABLE_MESSAGE = "You are not authorized to call {tool}. The call was not made."
PDP_FAILURE_MESSAGE = "Authorization for {tool} could not be decided, so the call was not made. Try again later."
ANONYMOUS_MESSAGE = "{tool} needs an authenticated caller. Sign in, then call it again."
RETRY_MESSAGE = "Authorization for {tool} is pending. The call was not made; try again later."
#: The SDK's own answer to a call of a tool the server does not have (``MCPServer``'s tool manager).
UNKNOWN_TOOL_MESSAGE = "Unknown tool: {tool}"
CREDENTIAL_MESSAGE = "Your current authorization is insufficient for {tool}; obtain a credential carrying the details."


@dataclass(frozen=True)
class GatedCall:
    """One ``tools/call`` the gate evaluated, with what it learned of it (so nothing after it asks again).

    Attributes:
        tool: the tool name.
        arguments: the call's arguments, as received.
        principal: the authenticated principal (the AuthZEN subject id).
        request: the AuthZEN request the PDP decided (an approval request carries it unchanged).
        echoed_context_id: the ``authorizationContextId`` the request echoed (correlation only).
        proceed: runs the rest of the interceptor chain and the tool; call it only once policy,
            re-evaluated with an approval as input, permits the call.
        input_responses: on an MRTR retry, the answers to the input requests of the last round.
        request_state: on an MRTR retry, the (SDK-verified) state the last round carried.
        client: the client info (``name``, ``version``) the request was mapped with.
        large: whether the arguments have more than
            :data:`~mcp_approval.json_shape.LARGE_JSON_MEMBERS` members, so that mapping,
            canonicalizing and sealing them runs on a worker thread.
    """

    tool: str
    arguments: Mapping[str, Any]
    principal: str
    request: EvaluationRequest
    echoed_context_id: str | None
    proceed: CallNext
    input_responses: Mapping[str, Any] | None = None
    request_state: str | None = None
    client: Mapping[str, str] | None = None
    large: bool = False


#: Whether the server has a tool of this name.
ToolExists = Callable[[str], bool]


class RequestableHandler(Protocol):
    """Answers a requestable denial (ARAP ``access_request`` in the decision context).

    Implementations pick the placement the request allows: a task (the client declared the
    tasks extension), a URL interaction (``elicitation.url``), or the degraded result. They must
    not call ``call.proceed`` before an approval has been re-evaluated to a permit.
    """

    async def __call__(self, call: GatedCall, decision: Decision, ctx: ServerRequestContext[Any, Any]) -> HandlerResult:
        """The result for this denied call."""
        ...


class DegradedRequestable:
    """The fallback for a requestable denial: ``isError`` + ``undisclosed``, with next-step guidance.

    A remedy exists (someone can approve the call), so the envelope never says ``unavailable``;
    the text tells the caller what to do. Backend artifacts (binding tokens, evaluation ids,
    endpoints) never appear; only the policy's human-facing ``display`` title and description do.
    """

    def __init__(self, *, guidance: str | None = None) -> None:
        self.guidance = guidance or (
            "Ask an approver to grant this call, or use a client that supports MCP tasks so the "
            "request can wait for approval; then call the tool again."
        )

    async def __call__(self, call: GatedCall, decision: Decision, ctx: ServerRequestContext[Any, Any]) -> HandlerResult:
        """The degraded ``CallToolResult`` for ``call``."""
        return final_denial(
            self.message(call, decision), remediation=Remediation.UNDISCLOSED, context_id=new_context_id()
        )

    def message(self, call: GatedCall, decision: Decision) -> str:
        """The text the caller reads: what is needed and the next step."""
        parts = [f"Calling {call.tool} requires approval. The call was not made."]
        denial = decision.requestable_denial
        display = (denial.access_request.display if denial is not None else None) or {}
        for key in ("title", "description"):
            value = display.get(key)
            if isinstance(value, str) and value:
                parts.append(value if value.endswith(".") else f"{value}.")
        parts.append(self.guidance)
        return " ".join(parts)


class PolicyGate(Extension):
    """The policy enforcement point for ``tools/call`` (see the module docstring).

    Args:
        pdp: the policy decision point asked about every call.
        mapper: how a call becomes an AuthZEN request.
        on_requestable: answers requestable denials (default :class:`DegradedRequestable`).
        principal_lookup: the request's principal, the AuthZEN subject id (default :func:`token_subject`).
        anonymous_principal: the subject id of anonymous HTTP callers; ``None`` denies them.
        references: issues ``authorization_reference`` values for reusable credentials.
        unchecked_tools: tools that run without a policy decision because they only read the
            caller's own approval requests (the ``approval_status`` tool of a server opening
            requests for clients without tasks), like ``tasks/get`` does.
        limits: the ``max_argument_*`` limits checked before anything else looks at the
            arguments (default: :class:`ApprovalOptions`' defaults).
        input_schemas: the tools' input schemas; a call whose arguments do not match its tool's
            schema is ``-32602`` naming the field, before policy (``None``: not checked here).
        tool_exists: whether the server has a tool; a call of one it does not have is answered
            ``Unknown tool: NAME`` (as the SDK answers it) before policy runs. Without it, such a
            call goes to the PDP like any other (which usually denies it).
    """

    identifier = DENIALS_EXTENSION

    def __init__(
        self,
        pdp: PolicyDecisionPoint,
        *,
        mapper: ToolCallMapper | None = None,
        on_requestable: RequestableHandler | None = None,
        principal_lookup: PrincipalLookup | None = None,
        anonymous_principal: str | None = None,
        references: AuthorizationReferences | None = None,
        unchecked_tools: frozenset[str] = frozenset(),
        limits: ApprovalOptions | None = None,
        input_schemas: InputSchemas | None = None,
        tool_exists: ToolExists | None = None,
    ) -> None:
        self.pdp = pdp
        self.mapper = mapper or ToolCallMapper()
        self.on_requestable: RequestableHandler = on_requestable or DegradedRequestable()
        self._principal_of = principal_lookup or token_subject
        self.anonymous_principal = anonymous_principal
        self.references = references
        self.unchecked_tools = unchecked_tools
        self.limits = limits or ApprovalOptions()
        self.input_schemas = input_schemas
        self._schema_check = SchemaCheck()
        self.tool_exists = tool_exists

    async def intercept_tool_call(
        self, params: types.CallToolRequestParams, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Decide the call afresh, then run it or answer the denial without running it."""
        with span("gate", tool=params.name) as traced:
            result = await self._intercept(params, ctx, call_next, traced)
            traced.set("task_id", _task_id_of(result))
            return result

    async def _intercept(
        self,
        params: types.CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
        traced: Span,
    ) -> HandlerResult:
        tool = params.name
        if self.tool_exists is not None and not self.tool_exists(tool):
            # An unknown tool is no authorization question: say so, as the plain SDK server does.
            traced.set("decision", "unknown_tool")
            return _unknown_tool(tool)
        arguments = params.arguments or {}
        large = large_json(arguments)  # a bounded look; large arguments are handled on a worker thread
        await off_loop(large, self._check_arguments, arguments)
        await self._check_schema(tool, arguments, large)
        if tool in self.unchecked_tools:
            traced.set("decision", "unchecked")
            return await call_next(ctx)
        echoed = note_retry(ctx.meta, operation=tool)  # correlation only; never decides anything
        principal = self._principal_of(ctx) or self.anonymous_principal
        if principal is None:
            traced.set("decision", "anonymous")
            return _denied(ANONYMOUS_MESSAGE.format(tool=tool), Remediation.UNDISCLOSED)
        client = _client_info(ctx)
        try:
            request = await off_loop(
                large, self.mapper.map_call, principal=principal, tool=tool, arguments=params.arguments, client=client
            )
        except ToolMappingError as exc:
            logger.info("tools/call %r denied: cannot map it to a policy request (%s)", tool, exc)
            traced.set("decision", "unmappable")
            return _denied(UNAVAILABLE_MESSAGE.format(tool=tool), Remediation.UNAVAILABLE)
        decision = await self._decide(request)
        if decision is None:
            traced.set("decision", "pdp_failure")
            return _denied(PDP_FAILURE_MESSAGE.format(tool=tool), Remediation.UNAVAILABLE)
        traced.set("decision", "permit" if decision.decision else "deny")
        if decision.decision:
            return await call_next(ctx)
        traced.set("next_action", decision.next_action().value)
        call = GatedCall(
            tool,
            dict(arguments),
            principal,
            request,
            echoed,
            call_next,
            input_responses=params.input_responses,
            request_state=params.request_state,
            client=client,
            large=large,
        )
        return await self._answer_denial(call, decision, ctx)

    def _check_arguments(self, arguments: Mapping[str, Any]) -> None:
        """Refuse arguments over the limits or with non-finite numbers (``-32602``), before the
        PDP, the binding digest or the store ever see them."""
        problem = argument_limit_problem(arguments, self.limits)
        if problem is not None:
            raise MCPError(code=INVALID_PARAMS, message=problem)
        malformed = unrepresentable_argument(arguments)
        if malformed is not None:
            raise MCPError(code=INVALID_PARAMS, message=malformed)

    async def _check_schema(self, tool: str, arguments: Mapping[str, Any], large: bool) -> None:
        """Refuse arguments the tool's listed input schema rejects (``-32602`` naming the field), so a
        call the tool would refuse never becomes an approval request."""
        if self.input_schemas is None:
            return
        schema = await self.input_schemas.input_schema(tool)
        if schema is None:  # no such tool: the server answers that itself
            return
        problem = await off_loop(large, self._schema_check.problem, tool, schema, arguments)
        if problem is not None:
            raise MCPError(code=INVALID_PARAMS, message=problem)

    async def _decide(self, request: EvaluationRequest) -> Decision | None:
        """The PDP's decision, or ``None`` when the PDP failed (the caller fails closed)."""
        try:
            return await self.pdp.evaluate(request)
        except Exception:
            logger.exception("PDP failed on tools/call %r; denying", request.resource.id)
            return None

    async def _answer_denial(
        self, call: GatedCall, decision: Decision, ctx: ServerRequestContext[Any, Any]
    ) -> HandlerResult:
        action = decision.next_action()
        logger.info(
            "tools/call %r denied for %s (reason=%s, next=%s)",
            call.tool,
            call.principal,
            decision.reason or "-",
            action.value,
        )
        if action is NextAction.REQUEST:
            return await self.on_requestable(call, decision, ctx)
        credential = self._credential_denial(call, decision)
        if credential is not None:
            return credential
        if action is NextAction.RETRY:
            return _denied(RETRY_MESSAGE.format(tool=call.tool), Remediation.UNDISCLOSED)
        return _denied(UNAVAILABLE_MESSAGE.format(tool=call.tool), Remediation.UNAVAILABLE)

    def _credential_denial(self, call: GatedCall, decision: Decision) -> types.CallToolResult | None:
        """SEP-2643 case 3, or a scope shortfall, when the decision context asks for a new credential."""
        context = decision.context or {}
        details = context.get(CONTEXT_AUTHORIZATION_DETAILS)
        if details is not None:
            single_use = context.get(CONTEXT_SINGLE_USE) is not False
            try:
                remediation = remediation_for(details, single_use=single_use, references=self.references)
            except ValueError as exc:
                logger.warning("PDP sent unusable authorization_details for %r (%s); denying", call.tool, exc)
                return None
            message = CREDENTIAL_MESSAGE.format(tool=call.tool)
            return credential_remediation(message, remediation, context_id=new_context_id())
        scopes = _scopes(context.get(CONTEXT_MISSING_SCOPES))
        if scopes:
            shortfall = Shortfall(tool=call.tool, missing_scopes=scopes, challenge_scopes=())
            return shortfall_result(shortfall, context_id=new_context_id())
        return None


def _task_id_of(result: HandlerResult) -> str | None:
    """The id of the task a call became (a flat ``CreateTaskResult``), if it became one."""
    task_id = result.get("taskId") if isinstance(result, dict) else None
    return task_id if isinstance(task_id, str) else None


def _unknown_tool(tool: str) -> types.CallToolResult:
    """The SDK's ``CallToolResult`` for a tool the server does not have (no denial envelope)."""
    text = UNKNOWN_TOOL_MESSAGE.format(tool=tool)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def _denied(message: str, remediation: Remediation) -> types.CallToolResult:
    if remediation is Remediation.UNDISCLOSED:
        return final_denial(message, remediation=Remediation.UNDISCLOSED, context_id=new_context_id())
    return final_denial(message, remediation=Remediation.UNAVAILABLE, context_id=new_context_id())


def _scopes(value: object) -> frozenset[str]:
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, Sequence):
        return frozenset(item for item in value if isinstance(item, str) and item)
    return frozenset()


def _client_info(ctx: ServerRequestContext[Any, Any]) -> dict[str, str] | None:
    """``name`` and ``version`` of the request's client info, when it sends them."""
    info = (ctx.meta or {}).get(META_CLIENT_INFO)
    if not isinstance(info, Mapping):
        return None
    picked = {key: info[key] for key in ("name", "version") if isinstance(info.get(key), str)}
    return picked or None
