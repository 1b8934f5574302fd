"""The ARAP approval backend: the PEP side of the AuthZEN Access Request and Approval Profile.

A requestable denial (``context.access_request``) becomes an Access Request at the Access
Request Service (ARS); the ARAP Task Handle is the durable handle; its status endpoint is the
authoritative status source; an approval is handed back for re-evaluation through the PDP
(the server does that, never this backend). Mapping (SEP-2848 "Example binding")::

    submit(key, submission)  POST access_request endpoint, Idempotency-Key = key (same key on retries)
    handle                   canonical JSON {id, status_endpoint} of the Task Handle
    status(handle)           GET status_endpoint; Retry-After honoured, exponential backoff with jitter
    cancel(handle)           POST task.links.cancel (when the ARS offers it)

Rules this module enforces (checklist numbers of the PEP profile, see
``conformance/arap-checklist.md``):

- credentials go only to URLs same-origin with the PDP metadata's ``access_request_endpoint`` or
  allowlisted, over https (http only on loopback with the dev switch) — submit, status and cancel
  URLs alike; a denial naming an untrusted endpoint is submitted to the metadata endpoint (4, 5);
- the denial members are echoed exactly as the PDP sent them; ``binding_token`` is never opened (6, 7);
- a terminal answer to the submission (``201`` + result) needs no poll (13);
- an unknown status keeps the request pending (never approval) until ``task.expires_at``; an
  ``approved`` task without a ``reevaluate`` result is not approval (12, 15);
- problem documents map onto outcomes: ``not_requestable``, ``invalid_denial_binding`` and
  ``expired_denial`` refuse the submission for good; ``duplicate_request`` is an idempotency
  conflict; ``unknown_task`` is a lost request; ``task_expired`` is ``expired``; 5xx, timeouts and
  bodies that are not JSON are transient (the caller retries, failing closed meanwhile).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import anyio
import httpx2

from mcp_approval.backends.arap_origins import OriginPolicy, UntrustedURLError
from mcp_approval.backends.arap_settings import ArapSettings
from mcp_approval.backends.arap_wire import (
    ArapProtocolError,
    TaskResponse,
    callback_state,
    decode_handle,
    encode_handle,
    parse_task_response,
    poll_delay_s,
    problem_code,
    retry_after_seconds,
    submission_body,
)
from mcp_approval.backends.contract import (
    ApprovalBackendError,
    ApprovalState,
    ApprovalStatus,
    ApprovalSubmission,
    IdempotencyConflictError,
    StatusListener,
    SubmissionRejectedError,
    UnknownRequestError,
)
from mcp_approval.protocol import (
    ARAP_DUPLICATE_REQUEST,
    ARAP_EXPIRED_DENIAL,
    ARAP_INVALID_DENIAL_BINDING,
    ARAP_INVALID_TASK_STATE,
    ARAP_NOT_REQUESTABLE,
    ARAP_TASK_EXPIRED,
    ARAP_UNKNOWN_TASK,
)

__all__ = ["ArapBackend", "ArapSettings", "EndpointSource"]

logger = logging.getLogger("mcp_approval.backends")

#: Problem codes that refuse a submission for good (ARAP §2.9).
_REJECTING: Final = frozenset({ARAP_NOT_REQUESTABLE, ARAP_INVALID_DENIAL_BINDING, ARAP_EXPIRED_DENIAL})
#: Problem codes after which a cancel has nothing left to do.
_CANCEL_DONE: Final = frozenset({ARAP_INVALID_TASK_STATE, ARAP_UNKNOWN_TASK, ARAP_TASK_EXPIRED})
_MAX_TRACKED: Final = 10_000

EndpointSource = Callable[[], Awaitable[str | None]]
"""Returns the PDP metadata's ``access_request_endpoint`` (discovered, cached by the caller)."""


class ArapBackend:
    """SEP-2848's approval backend over ARAP (see the module docstring).

    Args:
        settings: token, trust and timing.
        access_request_endpoint: the PDP metadata's ``access_request_endpoint`` (an awaitable
            source, so discovery happens lazily and is retried).
        client: an ``httpx2.AsyncClient`` to use (the caller closes it); one is made otherwise.
        rng: the jitter source (tests pass a seeded one).
    """

    name = "arap"
    supports_cancel = True

    def __init__(
        self,
        settings: ArapSettings,
        *,
        access_request_endpoint: EndpointSource,
        client: httpx2.AsyncClient | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.settings = settings
        self.origins = OriginPolicy(settings.allowed_origins, insecure_loopback=settings.dev_insecure_loopback)
        if settings.callback_url is not None:
            self.origins.check(settings.callback_url, anchor=settings.callback_url)  # https (or dev loopback)
        self._endpoint_source = access_request_endpoint
        self._own_client = client is None
        self._client = client
        self._rng = rng
        self._listener: StatusListener | None = None
        # Terminal answers to a submission, handed to the first status read (no poll needed).
        self._completed: dict[str, ApprovalState] = {}
        self._polls: dict[str, int] = {}
        self._cancel_links: dict[str, str] = {}

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self, listener: StatusListener | None = None) -> None:
        """Remember the wake-up listener and open the HTTP client."""
        self._listener = listener
        if self._client is None:
            self._client = httpx2.AsyncClient(timeout=self.settings.timeout_s)

    async def stop(self) -> None:
        """Close the HTTP client if this backend made it."""
        if self._own_client and self._client is not None:
            await self._client.aclose()
            self._client = None

    # -- callbacks -------------------------------------------------------------------------

    def callback_state(self, key: str) -> str | None:
        """The ``callback.state`` sent with the submission under ``key`` (``None``: no callbacks)."""
        secret = self.settings.callback_secret
        if not secret or not self.settings.callback_url:
            return None
        return callback_state(secret.get_secret_value(), key)

    @staticmethod
    def callback_handle(task: Mapping[str, Any]) -> str | None:
        """The handle a callback's ``task`` names (its id and status endpoint), if well formed."""
        task_id, endpoint = task.get("id"), task.get("status_endpoint")
        if isinstance(task_id, str) and task_id and isinstance(endpoint, str) and endpoint:
            return encode_handle(task_id, endpoint)
        return None

    # -- submission ------------------------------------------------------------------------

    async def submit(self, key: str, submission: ApprovalSubmission) -> str:
        """POST the Access Request under ``key`` (reused on every retry) and return the handle.

        Raises:
            SubmissionRejectedError: the ARS refused it for good, or it cannot be submitted.
            IdempotencyConflictError: ``key`` was used with another body.
            ApprovalBackendError: the ARS is unreachable or answered unusably.
        """
        evaluation = submission.evaluation
        if evaluation is None:
            raise SubmissionRejectedError("the denial carries no access_request to submit")
        if evaluation.request_schema_url or evaluation.request_catalogs_url:
            raise SubmissionRejectedError("the denial asks for schema-defined input this server cannot supply")
        anchor = await self._anchor()
        endpoint = self._submit_endpoint(evaluation.endpoint, anchor)
        state = self.callback_state(key)
        callback = {"endpoint": self.settings.callback_url or "", "state": state} if state else None
        body = submission_body(submission, client_name=self.settings.client_name, callback=callback)
        task = await self._post_submission(endpoint, body, key)
        return await self._submitted(task, anchor)

    async def find(self, key: str) -> str | None:
        """ARAP has no lookup by key alone; see :meth:`find_submitted`."""
        return None

    async def find_submitted(self, key: str, submission: ApprovalSubmission) -> str | None:
        """The handle of the request under ``key``, found by an idempotent resubmission.

        The ARS answers a same-key, equivalent body with the task it stored before checking the
        denial's freshness, so an expired denial here means the first submission never arrived.
        """
        try:
            return await self.submit(key, submission)
        except (SubmissionRejectedError, IdempotencyConflictError):
            return None

    def _submit_endpoint(self, named: str | None, anchor: str | None) -> str:
        """The denial's endpoint when trusted, else the metadata's (ARAP §2.12, checklist 4-5)."""
        if named is not None:
            if self.origins.trusted(named, anchor=anchor):
                return named
            logger.warning("a denial named an untrusted Access Request endpoint; using the PDP metadata's")
        if anchor is None:
            raise SubmissionRejectedError("no trusted access_request_endpoint (PDP metadata names none)")
        try:
            return self.origins.check(anchor, anchor=anchor)
        except UntrustedURLError as exc:
            raise SubmissionRejectedError(str(exc)) from exc

    async def _post_submission(self, endpoint: str, body: dict[str, Any], key: str) -> TaskResponse:
        """POST with the same Idempotency-Key until a readable Task Handle or a refusal.

        5xx answers, timeouts and unreadable bodies are retried (the ARS may have opened the
        request: the same key finds it again).
        """
        attempts = max(1, self.settings.submit_attempts)
        failure: ApprovalBackendError | None = None
        for attempt in range(attempts):
            if attempt:
                await asyncio.sleep(poll_delay_s(attempt - 1, base_s=0.1, cap_s=2.0, rng=self._rng))
            try:
                response = await self._exchange("POST", endpoint, body=body, key=key)
            except ApprovalBackendError as exc:
                failure = exc
                continue
            if response.status_code >= 500:
                failure = ApprovalBackendError(f"HTTP {response.status_code} from the Access Request endpoint")
                continue
            if response.status_code not in (200, 201, 202):
                raise self._submission_error(response, key)
            try:
                return self._read_task(response)
            except ApprovalBackendError as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def _submitted(self, task: TaskResponse, anchor: str | None) -> str:
        handle = self._remember(task, anchor)
        if task.state.status.terminal:
            self._completed[handle] = task.state  # synchronous completion: the first read needs no GET
            self._trim(self._completed)
            if self._listener is not None:
                await self._listener(handle)
        return handle

    def _submission_error(self, response: httpx2.Response, key: str) -> ApprovalBackendError:
        code = problem_code(_json_or_none(response))
        if code == ARAP_DUPLICATE_REQUEST:
            return IdempotencyConflictError(key[:8])
        if code in _REJECTING or (400 <= response.status_code < 500 and response.status_code not in (401, 403, 429)):
            return SubmissionRejectedError(f"the ARS refused the request: HTTP {response.status_code} {code or ''}")
        return ApprovalBackendError(f"HTTP {response.status_code} from the Access Request endpoint")

    # -- status ----------------------------------------------------------------------------

    async def status(self, handle: str) -> ApprovalState:
        """GET the task's status (or the submission's terminal answer, once, without a GET)."""
        completed = self._completed.pop(handle, None)
        if completed is not None:
            return completed
        try:
            task = await self._fetch(handle)
        except _ExpiredTask:
            self._polls.pop(handle, None)
            return ApprovalState(ApprovalStatus.EXPIRED)
        if task.state.status is not ApprovalStatus.PENDING:
            self._polls.pop(handle, None)
            return task.state
        attempt = self._polls.get(handle, 0)
        self._polls[handle] = attempt + 1
        self._trim(self._polls)
        delay = poll_delay_s(
            attempt,
            base_s=self.settings.poll_initial_s,
            cap_s=self.settings.poll_max_s,
            retry_after_s=task.state.retry_after_s,
            rng=self._rng,
        )
        state = task.state
        return ApprovalState(state.status, deadline_ms=state.deadline_ms, retry_after_s=delay, details=state.details)

    async def _fetch(self, handle: str) -> TaskResponse:
        try:
            task_id, endpoint = decode_handle(handle)
        except ArapProtocolError as exc:
            raise UnknownRequestError("not an ARAP handle") from exc
        anchor = await self._anchor()
        try:
            self.origins.check(endpoint, anchor=anchor)
        except UntrustedURLError as exc:
            raise UnknownRequestError(f"the stored status endpoint is not trusted: {exc}") from exc
        response = await self._exchange("GET", endpoint)
        if response.status_code != 200:
            raise self._status_error(response)
        task = self._read_task(response)
        if task.task_id != task_id or task.status_endpoint != endpoint:
            raise ApprovalBackendError("the status endpoint answered for another task")
        if task.cancel is not None and self.origins.trusted(task.cancel, anchor=anchor):
            self._cancel_links[handle] = task.cancel
            self._trim(self._cancel_links)
        return task

    def _status_error(self, response: httpx2.Response) -> ApprovalBackendError:
        code = problem_code(_json_or_none(response))
        if code == ARAP_UNKNOWN_TASK:
            return UnknownRequestError("the ARS does not know the task")
        if code == ARAP_TASK_EXPIRED:
            return _ExpiredTask("the task expired at the ARS")
        return ApprovalBackendError(f"HTTP {response.status_code} from the task status endpoint")

    # -- cancellation ----------------------------------------------------------------------

    async def cancel(self, handle: str) -> None:
        """POST ``links.cancel`` (a no-op when the ARS offers none or the task is already terminal)."""
        link = self._cancel_links.get(handle)
        if link is None:
            try:
                await self._fetch(handle)
            except (UnknownRequestError, _ExpiredTask):
                return
            link = self._cancel_links.get(handle)
        if link is None:
            return  # the ARS does not support cancellation: the local fence alone keeps the tool from running
        response = await self._exchange("POST", link, body={"reason": "withdrawn by the requester"})
        code = problem_code(_json_or_none(response))
        if response.status_code == 200 or code in _CANCEL_DONE or response.status_code == 405:
            self._cancel_links.pop(handle, None)
            return
        raise ApprovalBackendError(f"HTTP {response.status_code} from the cancel link")

    # -- HTTP ------------------------------------------------------------------------------

    async def _anchor(self) -> str | None:
        """The PDP metadata's Access Request endpoint (the origin every other URL is checked against)."""
        try:
            return await self._endpoint_source()
        except Exception as exc:  # discovery failing is a transient backend failure: fail closed
            raise ApprovalBackendError(f"PDP metadata unavailable ({exc})") from exc

    def _remember(self, task: TaskResponse, anchor: str | None) -> str:
        try:
            self.origins.check(task.status_endpoint, anchor=anchor)
        except UntrustedURLError as exc:
            raise SubmissionRejectedError(f"the ARS named an untrusted status endpoint: {exc}") from exc
        handle = encode_handle(task.task_id, task.status_endpoint)
        if task.cancel is not None and self.origins.trusted(task.cancel, anchor=anchor):
            self._cancel_links[handle] = task.cancel
        return handle

    @staticmethod
    def _read_task(response: httpx2.Response) -> TaskResponse:
        document = _json_or_none(response)
        retry_after = retry_after_seconds(response.headers.get("retry-after"))
        try:
            return parse_task_response(document, retry_after_s=retry_after)
        except ArapProtocolError as exc:
            raise ApprovalBackendError(f"unusable ARS answer: {exc}") from exc

    async def _exchange(self, method: str, url: str, *, body: Any = None, key: str | None = None) -> httpx2.Response:
        if self._client is None:
            raise ApprovalBackendError("the ARAP backend is not started")
        headers = {"Authorization": f"Bearer {self.settings.token.get_secret_value()}", "Accept": "application/json"}
        if key is not None:
            headers["Idempotency-Key"] = key
        try:
            with anyio.fail_after(self.settings.timeout_s):
                return await self._client.request(method, url, json=body, headers=headers)
        except TimeoutError as exc:
            raise ApprovalBackendError(f"no answer from the ARS within {self.settings.timeout_s}s") from exc
        except httpx2.HTTPError as exc:
            raise ApprovalBackendError(f"{type(exc).__name__} talking to the ARS") from exc

    @staticmethod
    def _trim(table: dict[str, Any]) -> None:
        while len(table) > _MAX_TRACKED:
            del table[next(iter(table))]


class _ExpiredTask(ApprovalBackendError):
    """``task_expired``: the handle outlived the task (read as ``expired``, never as lost)."""


def _json_or_none(response: httpx2.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None
