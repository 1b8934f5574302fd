"""Acting on SEP-2643 authorization denials: a tool caller that remediates and retries where it may.

::

    async def new_credential(hint: AuthorizationRemediationHint) -> None:
        token = await oauth.authorize(authorization_details=hint.authorization_details)
        http.headers["Authorization"] = f"Bearer {token}"      # the credential the retry presents

    caller = AuthorizingCaller(client, remediate=new_credential, origin_assured=True)
    try:
        result = await caller.call_tool("payments_initiate", {"amount": "5.00", ...})
    except AuthorizationDenied as denied:
        ...  # denied.denial.remediation, denied.result (what the server said), denied.why

What :meth:`AuthorizingCaller.call_tool` does with each envelope (read by
:func:`~mcp_approval.client.denials.read_denial`):

- no envelope: the result is returned as it is;
- an ill-formed envelope: the result is returned and a warning logged (never an exception);
- ``unavailable`` or ``undisclosed``: :class:`AuthorizationDenied` is raised, and the call is
  never sent again unchanged;
- ``available`` with an ``authorization_remediation`` hint: the ``remediate`` callback obtains a
  new credential for the hint's ``authorization_details`` (or selects one by its
  ``authorization_reference``), then the call is sent again with the denial's
  ``authorizationContextId`` echoed in ``_meta``; at most ``max_retries`` times;
- ``url`` (an ``InputRequiredResult`` whose envelope has a ``url`` hint): the caller drives the
  multi round-trip rounds itself, handing each input request (the url-mode elicitation) to the
  client's own callbacks (its ``elicitation_callback``), then resending the call with the answers,
  the ``requestState`` unchanged, and the denial's ``authorizationContextId`` echoed in ``_meta``;
  at most ``max_input_rounds`` rounds. An input request the client declines (its callback answers
  with an error) ends the call with :class:`AuthorizationDenied`, without resending it.
  Without ``origin_assured`` the url is not opened and :class:`AuthorizationDenied` is raised.
  An ``InputRequiredResult`` without an envelope is driven the same way (it is not a denial);
- hints of unknown types are ignored (the reader drops them with a note).

The other remediations are carried out beneath this wrapper:

- ``task`` (a ``CreateTaskResult``): :class:`~mcp_approval.client.tasks.TasksClient`, installed as
  a client extension, polls the task; the request is held by the server, so nothing is retried.
  The caller hands such a result to the claim of the extension that declared it, as
  ``Client.call_tool`` does.
- HTTP ``403 insufficient_scope``: the SDK's ``OAuthClientProvider`` (the ``auth`` of the
  ``httpx2`` client given to ``streamable_http_client``) steps the scope up and resends the
  request before this wrapper sees any result. :func:`~mcp_approval.client.challenges.read_challenge`
  classifies such a challenge for callers that handle HTTP themselves.

SEP-2643 forbids acting on a hint without assurance that the response came from the server
addressed; this module cannot establish that, so the caller states it with ``origin_assured``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast

import anyio
import mcp_types as types
from mcp.client import Client, InputRequiredRoundsExceededError, UnexpectedClaimedResult
from mcp.client.extension import ClaimContext, ResultClaim
from mcp.shared.exceptions import MCPError
from mcp_types import HEADER_MISMATCH
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from mcp_approval.client.denials import AuthorizationDenial, DenialReading, read_denial
from mcp_approval.client.inputs import answer_through_callbacks
from mcp_approval.denials.models import AuthorizationRemediationHint
from mcp_approval.errors import MCPApprovalError
from mcp_approval.protocol import METHOD_TOOLS_CALL

__all__ = ["AuthorizationDenied", "AuthorizingCaller", "CredentialRemediator"]

logger = logging.getLogger("mcp_approval.client")

CredentialRemediator = Callable[[AuthorizationRemediationHint], Awaitable[None]]
"""Puts a credential carrying the hint's ``authorization_details`` in place; returns when the retry can present it.

It may reuse a credential it already holds for the hint's ``authorization_reference``. To give
up, it raises; the exception propagates from :meth:`AuthorizingCaller.call_tool`.
"""


class AuthorizationDenied(MCPApprovalError):
    """A tool call the server refused on authorization grounds, and which this client did not (or could not) remedy.

    Attributes:
        denial: the denial of the last response.
        result: that response, with the server's explanation in its ``content`` (a
            ``CallToolResult``), or the ``InputRequiredResult`` of a ``url`` interaction the
            client declined or could not complete.
        why: why the call was not (or no longer) retried.
        attempts: how many times the call was sent.
    """

    def __init__(
        self,
        denial: AuthorizationDenial,
        result: types.CallToolResult | types.InputRequiredResult,
        *,
        why: str,
        attempts: int,
    ) -> None:
        super().__init__(f"authorization denied ({denial.remediation.value}): {why}")
        self.denial = denial
        self.result = result
        self.why = why
        self.attempts = attempts


class AuthorizingCaller:
    """Calls tools through an SDK :class:`~mcp.client.Client`, acting on SEP-2643 denials as the module describes.

    Args:
        client: the connected client; its elicitation callback answers the input requests of
            ``url`` remediations, and its extensions (``TasksClient``) handle ``task`` ones.
        remediate: obtains a new credential for an ``authorization_remediation`` hint; without
            it such a denial is raised as :class:`AuthorizationDenied`.
        origin_assured: whether the caller has assurance that responses come from the server it
            addressed (e.g. a direct TLS connection to it, or verified message signatures).
            Without it no hint is acted on, and no url-mode elicitation accompanying a denial is
            opened.
        max_retries: most retries of one call after remediation.
        max_input_rounds: most input-required rounds of one call (each answers the server's
            input requests and resends); by default the client's ``input_required_max_rounds``.
    """

    def __init__(
        self,
        client: Client,
        *,
        remediate: CredentialRemediator | None = None,
        origin_assured: bool = False,
        max_retries: int = 2,
        max_input_rounds: int | None = None,
    ) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be at least 0")
        if max_input_rounds is not None and max_input_rounds < 0:
            raise ValueError("max_input_rounds must be at least 0")
        self.client = client
        self.remediate = remediate
        self.origin_assured = origin_assured
        self.max_retries = max_retries
        self.max_input_rounds = max_input_rounds

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None = None, *, meta: Mapping[str, Any] | None = None
    ) -> types.CallToolResult:
        """Call ``name``; remediate and retry a remediable denial; raise :class:`AuthorizationDenied` otherwise.

        ``meta`` is sent on every attempt; every retry (after a new credential, or with the answers
        to a ``url`` interaction) adds the latest denial's ``authorizationContextId``.
        Exceptions of the client and of the ``remediate`` callback propagate unchanged; so do
        :class:`~mcp.client.InputRequiredRoundsExceededError` and :class:`~mcp.shared.exceptions.MCPError`
        when input rounds without a denial run out or are declined, as from ``Client.call_tool``.
        """
        max_rounds = self.client.input_required_max_rounds if self.max_input_rounds is None else self.max_input_rounds
        attempt_meta = dict(meta or {})
        attempts = remediations = rounds = 0
        responses: types.InputResponses | None = None
        state: str | None = None
        state_only_delay = _STATE_ONLY_BACKOFF_INITIAL_S
        while True:
            result = await self._send(name, arguments, attempt_meta, responses, state)
            attempts += 1
            denial = _denial(name, result)
            if isinstance(result, types.InputRequiredResult):
                rounds += 1
                if rounds > max_rounds:
                    if denial is not None:
                        why = f"still awaiting input after {max_rounds} input rounds"
                        raise AuthorizationDenied(denial, result, why=why, attempts=attempts)
                    raise InputRequiredRoundsExceededError(max_rounds)
                if denial is not None:
                    self._check_interaction(denial, result, attempts)
                    attempt_meta = {**(meta or {}), **denial.retry_meta()}
                if result.input_requests:
                    state_only_delay = _STATE_ONLY_BACKOFF_INITIAL_S
                    responses = await self._answer(name, result, denial, attempts)
                else:  # only requestState: the server is still working; back off, then ask again
                    await anyio.sleep(state_only_delay)
                    state_only_delay = min(state_only_delay * 2, _STATE_ONLY_BACKOFF_CAP_S)
                    responses = None
                state = result.request_state
                logger.info("tools/call %r: resending with the answers to its input requests (round %d)", name, rounds)
                continue
            if denial is None:
                return result
            hint = self._remedy(denial, result, remediations)
            assert self.remediate is not None  # _remedy raises without a callback
            logger.info("tools/call %r: obtaining a new credential, then retrying (attempt %d)", name, attempts + 1)
            await self.remediate(hint)
            remediations += 1
            attempt_meta = {**(meta or {}), **denial.retry_meta()}
            responses, state, rounds = None, None, 0  # a new call, not another round of the last one

    async def _send(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        meta: Mapping[str, Any],
        responses: types.InputResponses | None,
        state: str | None,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """One ``tools/call``; a claimed result (a task) is finished by its claim, as ``Client.call_tool`` does."""
        try:
            result = await self._send_once(name, arguments, meta, responses, state)
        except MCPError as mismatch:
            if mismatch.code != HEADER_MISMATCH or self.client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
                raise
            # As Client.call_tool: the tool's listed schema is missing or stale, so re-list and resend once.
            try:
                await self._relist_tool(name)
            except (MCPError, TimeoutError, ValidationError) as relist_error:
                raise mismatch from relist_error
            result = await self._send_once(name, arguments, meta, responses, state)
        if isinstance(result, types.CallToolResult | types.InputRequiredResult):
            return result
        final = await self._claim_of(result).resolve(
            result, ClaimContext(session=self.client.session, tool_name=name, read_timeout_seconds=None)
        )
        if not final.is_error:
            await self.client.session.validate_tool_result(name, final)
        return final

    async def _send_once(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        meta: Mapping[str, Any],
        responses: types.InputResponses | None,
        state: str | None,
    ) -> types.CallToolResult | types.InputRequiredResult | types.Result:
        return await self.client.session.call_tool(
            name,
            arguments,
            input_responses=responses,
            request_state=state,
            meta=self._request_meta(meta),
            allow_input_required=True,
            allow_claimed=True,
        )

    async def _relist_tool(self, name: str) -> None:
        cursor: str | None = None
        for _ in range(_RELIST_PAGE_CAP):
            page = await self.client.list_tools(cursor=cursor, cache_mode="refresh")
            cursor = page.next_cursor
            if cursor is None or any(tool.name == name for tool in page.tools):
                return

    def _claim_of(self, result: types.Result) -> ResultClaim[Any]:
        for extension in self.client.extensions or ():
            for claim in extension.claims():
                if claim.method == METHOD_TOOLS_CALL and type(result) is claim.model:
                    return claim
        raise UnexpectedClaimedResult(result)

    def _check_interaction(self, denial: AuthorizationDenial, result: types.InputRequiredResult, attempts: int) -> None:
        """Raise :class:`AuthorizationDenied` unless the input requests accompanying ``denial`` may be answered."""
        if denial.retry_unchanged_forbidden:
            raise AuthorizationDenied(
                denial, result, why=_FINAL_WHY[denial.reauthorization_forbidden], attempts=attempts
            )
        if not self.origin_assured:
            raise AuthorizationDenied(denial, result, why="the origin is not assured", attempts=attempts)

    async def _answer(
        self,
        name: str,
        result: types.InputRequiredResult,
        denial: AuthorizationDenial | None,
        attempts: int,
    ) -> types.InputResponses:
        """The client's answers to ``result``'s input requests, each through its own callbacks."""
        session = self.client.session
        responses: types.InputResponses = {}
        for key, request in (result.input_requests or {}).items():
            answer = await answer_through_callbacks(session, key, request)
            if isinstance(answer, types.ErrorData):
                logger.info("tools/call %r: the client declined input request %r: %s", name, key, answer.message)
                if denial is not None:
                    why = f"the client declined input request {key!r}: {answer.message}"
                    raise AuthorizationDenied(denial, result, why=why, attempts=attempts)
                raise MCPError.from_error_data(answer)
            responses[key] = answer
        return responses

    def _remedy(
        self, denial: AuthorizationDenial, result: types.CallToolResult, remediations: int
    ) -> AuthorizationRemediationHint:
        """The hint to act on before the next attempt, or :class:`AuthorizationDenied` when there is none."""
        attempts = remediations + 1
        if denial.retry_unchanged_forbidden:
            why = _FINAL_WHY[denial.reauthorization_forbidden]
            raise AuthorizationDenied(denial, result, why=why, attempts=attempts)
        hints = denial.actionable_hints(origin_assured=self.origin_assured)
        hint = next((hint for hint in hints if isinstance(hint, AuthorizationRemediationHint)), None)
        if hint is None:
            why = "no remediation this client can act on" if self.origin_assured else "the origin is not assured"
            raise AuthorizationDenied(denial, result, why=why, attempts=attempts)
        if self.remediate is None:
            raise AuthorizationDenied(denial, result, why="no credential remediator is configured", attempts=attempts)
        if remediations >= self.max_retries:
            why = f"still denied after {self.max_retries} retries"
            raise AuthorizationDenied(denial, result, why=why, attempts=attempts)
        return hint

    @staticmethod
    def _request_meta(meta: Mapping[str, Any]) -> types.RequestParamsMeta | None:
        return cast(types.RequestParamsMeta, dict(meta)) if meta else None


_STATE_ONLY_BACKOFF_INITIAL_S = 0.05
_STATE_ONLY_BACKOFF_CAP_S = 0.25
_RELIST_PAGE_CAP = 100

_FINAL_WHY = {
    True: "no remediation exists (unavailable); the call must not be retried unchanged",
    False: "the server does not disclose a remediation (undisclosed); the call must not be retried unchanged",
}


def _denial(name: str, result: types.CallToolResult | types.InputRequiredResult) -> AuthorizationDenial | None:
    """The denial in ``result``; an ill-formed envelope is logged and treated as none."""
    reading: DenialReading = read_denial(result)
    if reading.problem is not None:
        logger.warning("tools/call %r: ignored an ill-formed authorization denial envelope: %s", name, reading.problem)
    for note in reading.notes:
        logger.info("tools/call %r: authorization denial envelope: %s", name, note)
    return reading.denial
