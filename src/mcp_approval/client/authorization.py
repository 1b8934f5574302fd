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
- hints of unknown types are ignored (the reader drops them with a note).

The other remediations are already carried out beneath this wrapper, by the SDK client it wraps:

- ``url`` (an ``InputRequiredResult``): ``Client.call_tool``'s multi round-trip driver hands the
  url-mode elicitation to the client's ``elicitation_callback`` and resends the call with the
  answer. That driver resends the call's own ``_meta``; it does not add the context id, which a
  server must tolerate (SEP-2643, "Retry Echo").
- ``task`` (a ``CreateTaskResult``): :class:`~mcp_approval.client.tasks.TasksClient`, installed as
  a client extension, polls the task; the request is held by the server, so nothing is retried.
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

import mcp_types as types
from mcp.client import Client

from mcp_approval.client.denials import AuthorizationDenial, DenialReading, read_denial
from mcp_approval.denials.models import AuthorizationRemediationHint

__all__ = ["AuthorizationDenied", "AuthorizingCaller", "CredentialRemediator"]

logger = logging.getLogger("mcp_approval.client")

CredentialRemediator = Callable[[AuthorizationRemediationHint], Awaitable[None]]
"""Puts a credential carrying the hint's ``authorization_details`` in place; returns when the retry can present it.

It may reuse a credential it already holds for the hint's ``authorization_reference``. To give
up, it raises; the exception propagates from :meth:`AuthorizingCaller.call_tool`.
"""


class AuthorizationDenied(Exception):
    """A tool call the server refused on authorization grounds, and which this client did not (or could not) remedy.

    Attributes:
        denial: the denial of the last response.
        result: that response, with the server's explanation in its ``content``.
        why: why the call was not (or no longer) retried.
        attempts: how many times the call was sent.
    """

    def __init__(self, denial: AuthorizationDenial, result: types.CallToolResult, *, why: str, attempts: int) -> None:
        super().__init__(f"authorization denied ({denial.remediation.value}): {why}")
        self.denial = denial
        self.result = result
        self.why = why
        self.attempts = attempts


class AuthorizingCaller:
    """Calls tools through an SDK :class:`~mcp.client.Client`, acting on SEP-2643 denials as the module describes.

    Args:
        client: the connected client; its elicitation callback and extensions (``TasksClient``)
            handle ``url`` and ``task`` remediations.
        remediate: obtains a new credential for an ``authorization_remediation`` hint; without
            it such a denial is raised as :class:`AuthorizationDenied`.
        origin_assured: whether the caller has assurance that responses come from the server it
            addressed (e.g. a direct TLS connection to it, or verified message signatures).
            Without it no hint is acted on.
        max_retries: most retries of one call after remediation.
    """

    def __init__(
        self,
        client: Client,
        *,
        remediate: CredentialRemediator | None = None,
        origin_assured: bool = False,
        max_retries: int = 2,
    ) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be at least 0")
        self.client = client
        self.remediate = remediate
        self.origin_assured = origin_assured
        self.max_retries = max_retries

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None = None, *, meta: Mapping[str, Any] | None = None
    ) -> types.CallToolResult:
        """Call ``name``; remediate and retry a remediable denial; raise :class:`AuthorizationDenied` otherwise.

        ``meta`` is sent on every attempt; a retry adds the echoed ``authorizationContextId``.
        Exceptions of the client and of the ``remediate`` callback propagate unchanged.
        """
        attempt_meta = dict(meta or {})
        attempts = 0
        while True:
            result = await self.client.call_tool(name, arguments, meta=self._request_meta(attempt_meta))
            attempts += 1
            denial = _denial(name, result)
            if denial is None:
                return result
            hint = self._remedy(denial, result, attempts)
            assert self.remediate is not None  # _remedy raises without a callback
            logger.info("tools/call %r: obtaining a new credential, then retrying (attempt %d)", name, attempts + 1)
            await self.remediate(hint)
            attempt_meta = {**(meta or {}), **denial.retry_meta()}

    def _remedy(
        self, denial: AuthorizationDenial, result: types.CallToolResult, attempts: int
    ) -> AuthorizationRemediationHint:
        """The hint to act on before the next attempt, or :class:`AuthorizationDenied` when there is none."""
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
        if attempts > self.max_retries:
            why = f"still denied after {self.max_retries} retries"
            raise AuthorizationDenied(denial, result, why=why, attempts=attempts)
        return hint

    @staticmethod
    def _request_meta(meta: Mapping[str, Any]) -> types.RequestParamsMeta | None:
        return cast(types.RequestParamsMeta, dict(meta)) if meta else None


_FINAL_WHY = {
    True: "no remediation exists (unavailable); the call must not be retried unchanged",
    False: "the server does not disclose a remediation (undisclosed); the call must not be retried unchanged",
}


def _denial(name: str, result: types.CallToolResult) -> AuthorizationDenial | None:
    """The denial in ``result``; an ill-formed envelope is logged and treated as none."""
    reading: DenialReading = read_denial(result)
    if reading.problem is not None:
        logger.warning("tools/call %r: ignored an ill-formed authorization denial envelope: %s", name, reading.problem)
    for note in reading.notes:
        logger.info("tools/call %r: authorization denial envelope: %s", name, note)
    return reading.denial
