"""Builders for the five placements of SEP-2643's table, and the rule that an envelope means "not executed".

============================  ===============================  =============  =========================
case                          result                           remediation    builder
============================  ===============================  =============  =========================
1 user completes a URL        ``InputRequiredResult``          available      :func:`url_interaction`
2 decided out of band         ``CreateTaskResult``, tasks/get  available      :func:`task_created`,
                                                                              :func:`task_status`
3 new credential (no          ``CallToolResult`` isError       available      :func:`credential_remediation`
  transport challenge)
4 final, or not described     ``CallToolResult`` isError       unavailable,   :func:`final_denial`
                                                               undisclosed
5 HTTP transport challenge    status + ``WWW-Authenticate``    available      :mod:`.challenges`, and
                              (+ optional result)                             :func:`challenge_result`
============================  ===============================  =============  =========================

Code that runs the requested operation does so inside :func:`operation_executing`; no envelope
can be built there (:class:`EnvelopeAfterExecutionError`), and :func:`ordinary_failure` is the
shape of a failure after the operation began.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal
from urllib.parse import urlsplit

import mcp_types as types

from mcp_approval.denials.models import (
    AuthorizationDenialEnvelope,
    AuthorizationRemediation,
    AuthorizationRemediationHint,
    Remediation,
    RemediationHint,
    TaskHint,
    UrlHint,
)
from mcp_approval.errors import MCPApprovalError
from mcp_approval.protocol import META_AUTHORIZATION, RESULT_TYPE_TASK
from mcp_approval.tasks.states import TERMINAL

__all__ = [
    "DEFAULT_INPUT_KEY",
    "EnvelopeAfterExecutionError",
    "challenge_result",
    "credential_remediation",
    "denial_envelope",
    "final_denial",
    "operation_executing",
    "operation_started",
    "ordinary_failure",
    "task_created",
    "task_status",
    "url_interaction",
]

logger = logging.getLogger("mcp_approval.denials")

_EXECUTING: ContextVar[bool] = ContextVar("mcp_approval_operation_executing", default=False)

#: The ``inputRequests`` key of the URL elicitation a URL-interaction denial carries.
DEFAULT_INPUT_KEY = "authorization"


class EnvelopeAfterExecutionError(MCPApprovalError, RuntimeError):
    """A denial envelope was requested after the operation began; report an ordinary failure instead."""


@contextmanager
def operation_executing() -> Iterator[None]:
    """Mark the enclosed code as running the requested operation, so no denial envelope is built in it."""
    token = _EXECUTING.set(True)
    try:
        yield
    finally:
        _EXECUTING.reset(token)


def operation_started() -> bool:
    """Whether the current context runs inside :func:`operation_executing`."""
    return _EXECUTING.get()


def denial_envelope(
    remediation: Remediation,
    *,
    hints: Sequence[RemediationHint] | None = None,
    context_id: str | None = None,
) -> AuthorizationDenialEnvelope:
    """An envelope; refuses once the operation started, and rejects hints unless ``available``."""
    if _EXECUTING.get():
        raise EnvelopeAfterExecutionError(
            "the operation already began: report its failure without an authorization denial envelope"
        )
    envelope = AuthorizationDenialEnvelope(
        remediation=remediation,
        authorization_context_id=context_id,
        remediation_hints=tuple(hints) if hints else None,
    )
    logger.info(
        "authorization denial: remediation=%s hints=%s context=%s",
        envelope.remediation.value,
        ",".join(envelope.hint_types()) or "-",
        context_id or "-",
    )
    return envelope


def url_interaction(
    *,
    url: str,
    message: str,
    request_state: str | None = None,
    input_key: str = DEFAULT_INPUT_KEY,
    context_id: str | None = None,
) -> types.InputRequiredResult:
    """Case 1: an ``InputRequiredResult`` asking the user to open ``url``, with a ``url`` hint.

    Only for a request that declared ``elicitation.url`` (see :func:`~.placement.choose_placement`).
    """
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.netloc:
        raise ValueError("a remediation URL must be an absolute http(s) URL")
    envelope = denial_envelope(Remediation.AVAILABLE, hints=[UrlHint()], context_id=context_id)
    elicitation = types.ElicitRequest(params=types.ElicitRequestURLParams(message=message, url=url))
    return types.InputRequiredResult(
        input_requests={input_key: elicitation}, request_state=request_state, _meta=envelope.meta()
    )


def task_created(create_task_result: Mapping[str, Any], *, context_id: str | None = None) -> dict[str, Any]:
    """Case 2: the ``CreateTaskResult`` of a task that holds the denied request, with a ``task`` hint.

    Only for a request that declared the tasks extension. Repeat the same envelope on each
    ``tasks/get`` with :func:`task_status`.
    """
    if create_task_result.get("resultType") != RESULT_TYPE_TASK:
        raise ValueError("task_created needs a CreateTaskResult (resultType 'task')")
    if _is_terminal(create_task_result.get("status")):
        raise ValueError("a task holding a pending authorization decision cannot be terminal")
    envelope = denial_envelope(Remediation.AVAILABLE, hints=[TaskHint()], context_id=context_id)
    return _with_envelope(create_task_result, envelope)


def task_status(detailed_task: Mapping[str, Any], envelope: AuthorizationDenialEnvelope | None) -> dict[str, Any]:
    """A ``tasks/get`` result carrying ``envelope`` while the task is non-terminal, and none after.

    Pass the envelope the task was created with. A terminal task's denial, if any, belongs in
    the ``_meta`` of the ``CallToolResult`` in its ``result`` field, never on the outer result.
    """
    if envelope is None or _is_terminal(detailed_task.get("status")):
        return _without_envelope(detailed_task)
    return _with_envelope(detailed_task, envelope)


def credential_remediation(
    message: str, remediation: AuthorizationRemediation, *, context_id: str | None = None
) -> types.CallToolResult:
    """Case 3: a new credential carrying ``remediation``'s authorization details is needed.

    Build ``remediation`` with :func:`~.references.remediation_for`, which leaves out the
    reference for single-use credentials. This is the stdio form of an RAR step-up.
    """
    hint = AuthorizationRemediationHint.of(remediation)
    envelope = denial_envelope(Remediation.AVAILABLE, hints=[hint], context_id=context_id)
    return _error_result(message, envelope)


def final_denial(
    message: str,
    *,
    remediation: Literal[Remediation.UNAVAILABLE, Remediation.UNDISCLOSED],
    context_id: str | None = None,
) -> types.CallToolResult:
    """Case 4: no remedy (``unavailable``), or one this server does not describe (``undisclosed``).

    ``message`` is the content the caller reads; for ``undisclosed`` because the client declared
    no interaction, it is where the server describes the remedy.
    """
    if remediation not in (Remediation.UNAVAILABLE, Remediation.UNDISCLOSED):
        raise ValueError("final_denial is for unavailable or undisclosed denials")
    return _error_result(message, denial_envelope(remediation, context_id=context_id))


def challenge_result(
    message: str,
    *,
    remediation: AuthorizationRemediation | None = None,
    context_id: str | None = None,
) -> types.CallToolResult:
    """Case 5's optional result next to an HTTP challenge: ``available``, the hint optional.

    The challenge stays authoritative for the remedy; the envelope adds the classification.
    """
    hints = [AuthorizationRemediationHint.of(remediation)] if remediation is not None else None
    return _error_result(message, denial_envelope(Remediation.AVAILABLE, hints=hints, context_id=context_id))


def ordinary_failure(message: str) -> types.CallToolResult:
    """A failure of an operation that already began: ``isError`` and no envelope."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)


def _error_result(message: str, envelope: AuthorizationDenialEnvelope) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)], is_error=True, _meta=envelope.meta()
    )


def _is_terminal(status: object) -> bool:
    return isinstance(status, str) and status in {state.value for state in TERMINAL}


def _with_envelope(result: Mapping[str, Any], envelope: AuthorizationDenialEnvelope) -> dict[str, Any]:
    body = dict(result)
    meta = dict(body.get("_meta") or {})
    meta[META_AUTHORIZATION] = envelope.document()
    body["_meta"] = meta
    return body


def _without_envelope(result: Mapping[str, Any]) -> dict[str, Any]:
    body = dict(result)
    meta = body.get("_meta")
    if isinstance(meta, Mapping) and META_AUTHORIZATION in meta:
        rest = {key: value for key, value in meta.items() if key != META_AUTHORIZATION}
        if rest:
            body["_meta"] = rest
        else:
            del body["_meta"]
    return body
