"""Reading SEP-2643 authorization denials on the client: the envelope in a result.

::

    reading = read_denial(result)                 # CallToolResult, InputRequiredResult, CreateTaskResult
    reading = read_denial(task, method="tasks/get")
    if reading.denial and reading.denial.retry_unchanged_forbidden:
        ...                                       # never resend the same call as it was
    for note in reading.notes:
        log.info("denial envelope: %s", note)     # parts the reader ignored, and why

A malformed envelope never raises: :attr:`DenialReading.problem` says why it was rejected.
Hints of unknown types, and hints that do not belong on the result that carries them, are
ignored with a note; hostile ``authorization_details`` and unusable context ids likewise.

The HTTP challenge is read by :func:`read_challenge` (:mod:`mcp_approval.client.challenges`,
re-exported here).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from pydantic import BaseModel

from mcp_approval.client.challenges import (
    CHALLENGE_TRANSACTION_AUTHORIZATION,
    MAX_CHALLENGE_LENGTH,
    ChallengeDenial,
    ChallengeReading,
    read_challenge,
)
from mcp_approval.denials.context import MAX_CONTEXT_ID_LENGTH, is_usable_context_id
from mcp_approval.denials.models import (
    MAX_REFERENCE_LENGTH,
    MAX_TYPE_LENGTH,
    AuthorizationRemediationHint,
    Remediation,
    TaskHint,
    UrlHint,
    validate_authorization_details,
)
from mcp_approval.protocol import (
    HINT_AUTHORIZATION_REMEDIATION,
    HINT_TASK,
    HINT_URL,
    META_AUTHORIZATION,
    META_AUTHORIZATION_CONTEXT_ID,
    METHOD_ELICITATION_CREATE,
    METHOD_TASKS_GET,
    METHOD_TOOLS_CALL,
    REASON_INSUFFICIENT_AUTHORIZATION,
    RESULT_TYPE_INPUT_REQUIRED,
    RESULT_TYPE_TASK,
)

__all__ = [
    "CHALLENGE_TRANSACTION_AUTHORIZATION",
    "MAX_CHALLENGE_LENGTH",
    "MAX_ENVELOPE_BYTES",
    "MAX_HINTS",
    "AuthorizationDenial",
    "ChallengeDenial",
    "ChallengeReading",
    "DenialReading",
    "Hint",
    "ResultKind",
    "denial_of",
    "read_challenge",
    "read_denial",
]

logger = logging.getLogger("mcp_approval.client")

#: Largest envelope the reader looks at (compact JSON bytes).
MAX_ENVELOPE_BYTES: Final = 64 * 1024
#: Most hints the reader looks at; later ones are ignored.
MAX_HINTS: Final = 16

_TERMINAL_TASK_STATUSES: Final = frozenset({"completed", "failed", "cancelled"})

Hint = UrlHint | TaskHint | AuthorizationRemediationHint


class ResultKind(StrEnum):
    """The results that can carry an envelope."""

    CALL_TOOL = "CallToolResult"
    INPUT_REQUIRED = "InputRequiredResult"
    CREATE_TASK = "CreateTaskResult"
    TASK_STATUS = "tasks/get result"


_KINDS_OF_METHOD: Final = {
    METHOD_TOOLS_CALL: frozenset({ResultKind.CALL_TOOL, ResultKind.INPUT_REQUIRED, ResultKind.CREATE_TASK}),
    METHOD_TASKS_GET: frozenset({ResultKind.TASK_STATUS}),
}
_HINTS_OF_KIND: Final = {
    ResultKind.CALL_TOOL: frozenset({HINT_AUTHORIZATION_REMEDIATION}),
    ResultKind.INPUT_REQUIRED: frozenset({HINT_URL}),
    ResultKind.CREATE_TASK: frozenset({HINT_TASK}),
    ResultKind.TASK_STATUS: frozenset({HINT_TASK}),
}


@dataclass(frozen=True)
class AuthorizationDenial:
    """A denial the server expressed in a result's envelope. Its presence means the call was not performed."""

    reason: str
    remediation: Remediation
    result_kind: ResultKind
    context_id: str | None = None
    hints: tuple[Hint, ...] = ()
    url_requests: Mapping[str, str] = field(default_factory=dict)
    """For a ``url`` hint: ``inputRequests`` key → URL of each url-mode elicitation."""
    task_id: str | None = None

    @property
    def retry_unchanged_forbidden(self) -> bool:
        """``unavailable`` and ``undisclosed``: the same request must not be sent again as it was."""
        return self.remediation is not Remediation.AVAILABLE

    @property
    def reauthorization_forbidden(self) -> bool:
        """``unavailable``: no reauthorization flow may begin."""
        return self.remediation is Remediation.UNAVAILABLE

    @property
    def remedy_may_exist(self) -> bool:
        """False only for ``unavailable``; ``undisclosed`` never means there is no remedy."""
        return self.remediation is not Remediation.UNAVAILABLE

    def retry_meta(self) -> dict[str, str]:
        """The request ``_meta`` entry a retry carries: the context id, verbatim, if there is one."""
        return {META_AUTHORIZATION_CONTEXT_ID: self.context_id} if self.context_id is not None else {}

    def actionable_hints(self, *, origin_assured: bool) -> tuple[Hint, ...]:
        """The hints to act on: none unless the caller is assured the response came from the server it addressed.

        SEP-2643 mandates no mechanism for that assurance (an authenticated connection to an
        intermediary is not one), so the caller states it.
        """
        return self.hints if origin_assured else ()

    def actionable_url_requests(self, *, origin_assured: bool) -> Mapping[str, str]:
        """The URLs to open for a ``url`` hint, under the same rule as :meth:`actionable_hints`."""
        return self.url_requests if origin_assured else {}

    @property
    def authorization_remediation(self) -> AuthorizationRemediationHint | None:
        """The first ``authorization_remediation`` hint, if any."""
        return next((hint for hint in self.hints if isinstance(hint, AuthorizationRemediationHint)), None)


@dataclass(frozen=True)
class DenialReading:
    """What reading a result found: a denial, or the reason an envelope was rejected, plus notes."""

    denial: AuthorizationDenial | None = None
    problem: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def envelope_present(self) -> bool:
        """Whether the result carried an envelope at all (usable or not)."""
        return self.denial is not None or self.problem is not None


def read_denial(result: Mapping[str, Any] | BaseModel, *, method: str = METHOD_TOOLS_CALL) -> DenialReading:
    """Read the envelope of the result of ``method`` (``tools/call`` or ``tasks/get``). Never raises."""
    document = _document(result)
    if document is None:
        return DenialReading(problem="the result is not a JSON object")
    kind = _kind_of(document)
    if kind is ResultKind.TASK_STATUS and document.get("status") in _TERMINAL_TASK_STATUSES:
        return _read_terminal_task(document)
    raw = _envelope_of(document)
    if raw is None:
        return DenialReading()
    if kind is None or kind not in _KINDS_OF_METHOD.get(method, frozenset()):
        where = kind.value if kind is not None else "an unrecognised result"
        return DenialReading(problem=f"an envelope on {where} of {method}, which cannot carry one")
    return _read(raw, kind, document)


def denial_of(result: Mapping[str, Any] | BaseModel, *, method: str = METHOD_TOOLS_CALL) -> AuthorizationDenial | None:
    """The denial in ``result``, or ``None``; rejected envelopes and ignored parts are logged."""
    reading = read_denial(result, method=method)
    if reading.problem is not None:
        logger.warning("ignored an authorization denial envelope: %s", reading.problem)
    for note in reading.notes:
        logger.info("authorization denial envelope: %s", note)
    return reading.denial


def _document(result: Mapping[str, Any] | BaseModel) -> dict[str, Any] | None:
    if isinstance(result, BaseModel):
        return result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dict(result) if isinstance(result, Mapping) else None


def _kind_of(document: Mapping[str, Any]) -> ResultKind | None:
    result_type = document.get("resultType")
    if result_type == RESULT_TYPE_INPUT_REQUIRED:
        return ResultKind.INPUT_REQUIRED
    if result_type == RESULT_TYPE_TASK:
        return ResultKind.CREATE_TASK
    if "taskId" in document and "status" in document:
        return ResultKind.TASK_STATUS
    if isinstance(document.get("content"), list):
        return ResultKind.CALL_TOOL
    return None


def _envelope_of(document: Mapping[str, Any]) -> Any:
    meta = document.get("_meta")
    return meta.get(META_AUTHORIZATION) if isinstance(meta, Mapping) else None


def _read_terminal_task(document: Mapping[str, Any]) -> DenialReading:
    """A terminal task's denial is the one in its ``result``; an outer envelope is stale."""
    notes = []
    if _envelope_of(document) is not None:
        notes.append(f"ignored the envelope of a {document.get('status')} task: its denial, if any, is in its result")
    inner = document.get("result")
    if document.get("status") != "completed" or not isinstance(inner, Mapping):
        return DenialReading(notes=tuple(notes))
    reading = read_denial(inner, method=METHOD_TOOLS_CALL)
    if reading.denial is not None and reading.denial.result_kind is not ResultKind.CALL_TOOL:
        return DenialReading(problem="a completed task's result carries a non-final result shape", notes=tuple(notes))
    return DenialReading(reading.denial, reading.problem, (*notes, *reading.notes))


def _read(raw: Any, kind: ResultKind, document: Mapping[str, Any]) -> DenialReading:
    notes: list[str] = []
    problem = _envelope_problem(raw)
    if problem is None:
        problem = _placement_problem(raw["remediation"], kind, document)
    if problem is not None:
        return DenialReading(problem=problem)
    remediation = Remediation(raw["remediation"])
    if raw["reason"] != REASON_INSUFFICIENT_AUTHORIZATION:
        notes.append(f"reason {raw['reason'][:64]!r} is not one this client knows")
    hints = _hints(raw.get("remediationHints"), remediation, kind, notes)
    url_requests = _url_requests(document) if kind is ResultKind.INPUT_REQUIRED else {}
    if any(isinstance(hint, UrlHint) for hint in hints) and not url_requests:
        notes.append("ignored a url hint: the result carries no url-mode elicitation")
        hints = tuple(hint for hint in hints if not isinstance(hint, UrlHint))
    task_id = document.get("taskId") if kind in (ResultKind.CREATE_TASK, ResultKind.TASK_STATUS) else None
    denial = AuthorizationDenial(
        reason=raw["reason"],
        remediation=remediation,
        result_kind=kind,
        context_id=_context_id(raw, notes),
        hints=hints,
        url_requests=url_requests,
        task_id=task_id if isinstance(task_id, str) else None,
    )
    return DenialReading(denial=denial, notes=tuple(notes))


def _envelope_problem(raw: Any) -> str | None:
    if not isinstance(raw, dict):
        return "the envelope is not an object"
    try:
        size = len(json.dumps(raw, separators=(",", ":")).encode("utf-8"))
    except (TypeError, ValueError, RecursionError):
        return "the envelope is not serialisable JSON"
    if size > MAX_ENVELOPE_BYTES:
        return f"the envelope is {size} bytes; the limit is {MAX_ENVELOPE_BYTES}"
    reason = raw.get("reason")
    if not isinstance(reason, str) or not reason or len(reason) > MAX_TYPE_LENGTH:
        return "the envelope has no string reason"
    if raw.get("remediation") not in {value.value for value in Remediation}:
        return f"the envelope's remediation {str(raw.get('remediation'))[:32]!r} is not one SEP-2643 defines"
    return None


def _placement_problem(remediation: str, kind: ResultKind, document: Mapping[str, Any]) -> str | None:
    if kind is ResultKind.CALL_TOOL and document.get("isError") is not True:
        return "an envelope on a CallToolResult without isError: a denial is never a success"
    if kind is not ResultKind.CALL_TOOL and remediation != Remediation.AVAILABLE:
        return f"remediation {remediation!r} on a {kind.value}, which only carries available denials"
    if kind is ResultKind.CREATE_TASK and document.get("status") in _TERMINAL_TASK_STATUSES:
        return "an envelope on a CreateTaskResult that is already terminal"
    return None


def _context_id(raw: Mapping[str, Any], notes: list[str]) -> str | None:
    if "authorizationContextId" not in raw:
        return None
    value = raw["authorizationContextId"]
    if is_usable_context_id(value):
        return str(value)
    size = len(value) if isinstance(value, str) else "n/a"
    notes.append(
        f"ignored an unusable authorizationContextId ({type(value).__name__}, length {size}; "
        f"at most {MAX_CONTEXT_ID_LENGTH} visible ASCII characters): it will not be echoed"
    )
    return None


def _hints(raw: Any, remediation: Remediation, kind: ResultKind, notes: list[str]) -> tuple[Hint, ...]:
    if raw is None:
        return ()
    if remediation is not Remediation.AVAILABLE:
        notes.append(f"ignored remediationHints on a {remediation.value} denial, where they must not appear")
        return ()
    if not isinstance(raw, list):
        notes.append("ignored remediationHints: not an array")
        return ()
    if len(raw) > MAX_HINTS:
        notes.append(f"ignored {len(raw) - MAX_HINTS} hints past the first {MAX_HINTS}")
    hints = (_hint(index, entry, kind, notes) for index, entry in enumerate(raw[:MAX_HINTS]))
    return tuple(hint for hint in hints if hint is not None)


def _hint(index: int, entry: Any, kind: ResultKind, notes: list[str]) -> Hint | None:
    kind_of_hint = entry.get("type") if isinstance(entry, dict) else None
    if not isinstance(kind_of_hint, str) or not kind_of_hint:
        notes.append(f"ignored hint {index}: it has no string type")
        return None
    if kind_of_hint not in (HINT_URL, HINT_TASK, HINT_AUTHORIZATION_REMEDIATION):
        notes.append(f"ignored hint {index} of unrecognised type {kind_of_hint[:64]!r}")
        return None
    if kind_of_hint not in _HINTS_OF_KIND[kind]:
        notes.append(f"ignored hint {index}: a {kind_of_hint} hint does not belong on a {kind.value}")
        return None
    if kind_of_hint == HINT_URL:
        return UrlHint()
    if kind_of_hint == HINT_TASK:
        return TaskHint()
    return _authorization_hint(index, entry, notes)


def _authorization_hint(index: int, entry: Mapping[str, Any], notes: list[str]) -> Hint | None:
    try:
        details = validate_authorization_details(entry.get("authorization_details"))
    except ValueError as exc:
        notes.append(f"ignored authorization_remediation hint {index}: {exc}")
        return None
    reference = entry.get("authorization_reference")
    if reference is not None and not _usable_reference(reference):
        notes.append(f"ignored the authorization_reference of hint {index}: not a string of at most 512 characters")
        reference = None
    return AuthorizationRemediationHint(authorization_details=details, authorization_reference=reference)


def _usable_reference(value: object) -> bool:
    return (
        isinstance(value, str)
        and 0 < len(value) <= MAX_REFERENCE_LENGTH
        and not any(ord(char) < 0x20 or ord(char) == 0x7F for char in value)
    )


def _url_requests(document: Mapping[str, Any]) -> dict[str, str]:
    requests = document.get("inputRequests")
    found: dict[str, str] = {}
    if not isinstance(requests, Mapping):
        return found
    for key, request in requests.items():
        if not isinstance(request, Mapping) or request.get("method") != METHOD_ELICITATION_CREATE:
            continue
        params = request.get("params")
        if isinstance(params, Mapping) and params.get("mode") == "url" and isinstance(params.get("url"), str):
            found[str(key)] = params["url"]
    return found
