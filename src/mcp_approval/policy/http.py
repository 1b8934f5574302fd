"""``HttpPDP``: an AuthZEN Authorization API 1.0 client that fails closed.

- Discovery: ``GET https://host/.well-known/authzen-configuration[/path]`` for the PDP identifier
  ``https://host[/path]``; a document whose ``policy_decision_point`` differs from the identifier is
  discarded (AuthZEN §9). Discovery happens on first use and is retried on later calls until it
  succeeds; ``discovery=False`` uses the default endpoints under the identifier instead.
- Evaluation: ``POST`` to the single or batch endpoint; a batch hoists members shared by every
  entry into the top-level defaults. Without a batch endpoint, a batch runs as single evaluations.
- Every request carries an ``X-Request-ID``; a response echoing a *different* id is rejected
  (a missing echo is tolerated).
- Fail closed: a timeout (``timeout_s`` bounds the whole exchange), a connection error, a non-200
  status, a body that is not a well-formed decision, or a batch answer of the wrong length is a
  deny whose context says why (``reason``: ``pdp_unavailable``, ``pdp_error`` or
  ``pdp_invalid_response``, plus ``detail``). Such a deny is never requestable.
- Endpoints must be ``https``; ``http`` is accepted for loopback hosts, or everywhere with
  ``allow_insecure_http=True``.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Final, TypeVar
from urllib.parse import urlsplit

import anyio
import httpx2
from pydantic import ValidationError

from mcp_approval.errors import MCPApprovalError
from mcp_approval.hosts import is_loopback_host
from mcp_approval.policy.models import (
    REASON_PDP_ERROR,
    REASON_PDP_INVALID_RESPONSE,
    REASON_PDP_UNAVAILABLE,
    Decision,
    EvaluationRequest,
    EvaluationsResponse,
    EvaluationsSemantic,
    PDPMetadata,
)
from mcp_approval.policy.pdp import evaluate_in_order, stops_batch

__all__ = [
    "EVALUATIONS_PATH",
    "EVALUATION_PATH",
    "REQUEST_ID_HEADER",
    "WELL_KNOWN",
    "HttpPDP",
    "PDPError",
    "batch_body",
]

logger = logging.getLogger("mcp_approval.policy")

WELL_KNOWN: Final = "/.well-known/authzen-configuration"
EVALUATION_PATH: Final = "/access/v1/evaluation"
EVALUATIONS_PATH: Final = "/access/v1/evaluations"
REQUEST_ID_HEADER: Final = "X-Request-ID"
_DEFAULTABLE = ("subject", "action", "resource", "context")


class PDPError(MCPApprovalError):
    """A PDP exchange failed; ``reason`` is the decision-context reason code of the resulting deny."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail

    def decision(self) -> Decision:
        """The fail-closed deny standing for this failure."""
        return Decision.deny(self.reason, detail=self.detail)


class HttpPDP:
    """A remote AuthZEN PDP.

    Args:
        pdp: the PDP identifier (``https://pdp.example.com`` or ``https://host/tenant``).
        client: an ``httpx2.AsyncClient`` to use (the caller closes it); by default one is created
            and closed by :meth:`aclose`.
        timeout_s: the bound on one whole HTTP exchange (discovery or evaluation).
        headers: extra headers on every request (e.g. ``Authorization``).
        discovery: read the PDP metadata first; ``False`` uses the default endpoint paths.
        allow_insecure_http: accept ``http`` endpoints on hosts other than loopback.
    """

    def __init__(
        self,
        pdp: str,
        *,
        client: httpx2.AsyncClient | None = None,
        timeout_s: float = 5.0,
        headers: Mapping[str, str] | None = None,
        discovery: bool = True,
        allow_insecure_http: bool = False,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError("timeout_s must be > 0")
        self.identifier = pdp.rstrip("/")
        self.timeout_s = timeout_s
        self.allow_insecure_http = allow_insecure_http
        problem = self._url_problem(self.identifier)
        if problem:
            raise ValueError(problem)
        self._headers = dict(headers or {})
        self._own_client = client is None
        self._client = client or httpx2.AsyncClient(timeout=timeout_s)
        self._discovery = discovery
        self._metadata: PDPMetadata | None = None
        self._lock = anyio.Lock()
        if not discovery:
            self._metadata = PDPMetadata(
                policy_decision_point=self.identifier,
                access_evaluation_endpoint=self.identifier + EVALUATION_PATH,
                access_evaluations_endpoint=self.identifier + EVALUATIONS_PATH,
            )

    async def __aenter__(self) -> HttpPDP:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP client if this PDP created it."""
        if self._own_client:
            await self._client.aclose()

    @property
    def well_known_url(self) -> str:
        """Where the PDP metadata is read: the well-known path goes between host and path."""
        parts = urlsplit(self.identifier)
        return f"{parts.scheme}://{parts.netloc}{WELL_KNOWN}{parts.path.rstrip('/')}"

    async def metadata(self) -> PDPMetadata:
        """The PDP metadata, discovered once; raises :class:`PDPError` when it cannot be had."""
        if self._metadata is not None:
            return self._metadata
        async with self._lock:
            if self._metadata is None:
                self._metadata = await self._discover()
        return self._metadata

    # -- PolicyDecisionPoint -----------------------------------------------------------------

    async def evaluate(self, request: EvaluationRequest, *, request_id: str | None = None) -> Decision:
        """Ask the PDP for one decision; any failure is a deny (see the module docstring)."""
        try:
            endpoint = (await self.metadata()).access_evaluation_endpoint
            body = await self._exchange("POST", endpoint, request.to_wire(), request_id)
            return _parse(Decision, body)
        except PDPError as exc:
            logger.warning("PDP %s: failing closed (%s: %s)", self.identifier, exc.reason, exc.detail)
            return exc.decision()

    async def evaluate_many(
        self,
        requests: Sequence[EvaluationRequest],
        semantic: EvaluationsSemantic = EvaluationsSemantic.EXECUTE_ALL,
        *,
        request_id: str | None = None,
    ) -> list[Decision]:
        """Ask the PDP for several decisions in one exchange (or one by one without a batch endpoint)."""
        if not requests:
            return []
        try:
            endpoint = (await self.metadata()).access_evaluations_endpoint
            if endpoint is None:
                return await evaluate_in_order(self.evaluate, requests, semantic)
            body = await self._exchange("POST", endpoint, batch_body(requests, semantic), request_id)
            return _batch_decisions(_parse(EvaluationsResponse, body), len(requests), semantic)
        except PDPError as exc:
            logger.warning("PDP %s: failing closed on a batch (%s: %s)", self.identifier, exc.reason, exc.detail)
            deny = exc.decision()
            return [deny] if semantic is EvaluationsSemantic.DENY_ON_FIRST_DENY else [deny] * len(requests)

    # -- HTTP --------------------------------------------------------------------------------

    async def _discover(self) -> PDPMetadata:
        metadata = _parse(PDPMetadata, await self._exchange("GET", self.well_known_url, None, None))
        if metadata.policy_decision_point.rstrip("/") != self.identifier:
            raise PDPError(
                REASON_PDP_INVALID_RESPONSE,
                f"metadata names policy_decision_point {metadata.policy_decision_point!r}, not {self.identifier!r}",
            )
        for url in (metadata.access_evaluation_endpoint, metadata.access_evaluations_endpoint):
            problem = self._url_problem(url) if url is not None else None
            if problem:
                raise PDPError(REASON_PDP_INVALID_RESPONSE, problem)
        return metadata

    async def _exchange(self, method: str, url: str, body: Any, request_id: str | None) -> Any:
        request_id = request_id or uuid.uuid4().hex
        headers = {**self._headers, REQUEST_ID_HEADER: request_id, "Accept": "application/json"}
        try:
            with anyio.fail_after(self.timeout_s):
                response = await self._client.request(method, url, json=body, headers=headers)
        except TimeoutError as exc:
            raise PDPError(REASON_PDP_UNAVAILABLE, f"no answer from {url} within {self.timeout_s}s") from exc
        except httpx2.HTTPError as exc:
            raise PDPError(REASON_PDP_UNAVAILABLE, f"{type(exc).__name__} on {url}: {exc}") from exc
        except Exception as exc:  # fail closed on anything the transport throws
            logger.exception("unexpected error talking to the PDP at %s", url)
            raise PDPError(REASON_PDP_UNAVAILABLE, f"{type(exc).__name__} on {url}") from exc
        return _response_json(response, url, request_id)

    def _url_problem(self, url: str) -> str | None:
        parts = urlsplit(url)
        secure = parts.scheme == "https" or (
            parts.scheme == "http" and (self.allow_insecure_http or is_loopback_host(parts.hostname))
        )
        if secure and parts.netloc and not parts.query and not parts.fragment:
            return None
        return f"PDP URL must be https (http only on loopback), without query or fragment: {url!r}"


def batch_body(requests: Sequence[EvaluationRequest], semantic: EvaluationsSemantic) -> dict[str, Any]:
    """The batch request body: members every entry shares become the top-level defaults."""
    items = [request.to_wire() for request in requests]
    body: dict[str, Any] = {}
    for key in _DEFAULTABLE:
        values = [item.get(key) for item in items]
        if all(key in item for item in items) and all(value == values[0] for value in values):
            body[key] = values[0]
            for item in items:
                del item[key]
    body["evaluations"] = items
    if semantic is not EvaluationsSemantic.EXECUTE_ALL:
        body["options"] = {"evaluations_semantic": semantic.value}
    return body


def _response_json(response: httpx2.Response, url: str, request_id: str) -> Any:
    if response.status_code != 200:
        reason = REASON_PDP_UNAVAILABLE if response.status_code >= 500 else REASON_PDP_ERROR
        raise PDPError(reason, f"HTTP {response.status_code} from {url}")
    echoed = response.headers.get(REQUEST_ID_HEADER)
    if echoed is not None and echoed != request_id:
        raise PDPError(REASON_PDP_INVALID_RESPONSE, f"{url} answered request {echoed!r}, not {request_id!r}")
    try:
        return json.loads(response.content)
    except ValueError as exc:
        raise PDPError(REASON_PDP_INVALID_RESPONSE, f"{url} answered with a body that is not JSON") from exc


_Model = TypeVar("_Model", Decision, EvaluationsResponse, PDPMetadata)


def _parse(model: type[_Model], body: Any) -> _Model:
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        detail = f"not a valid {model.__name__}: {exc.error_count()} error(s), first: {exc.errors()[0]['msg']}"
        raise PDPError(REASON_PDP_INVALID_RESPONSE, detail) from exc


def _batch_decisions(response: EvaluationsResponse, expected: int, semantic: EvaluationsSemantic) -> list[Decision]:
    decisions = response.evaluations
    complete = len(decisions) == expected
    stopped_early = (
        semantic is not EvaluationsSemantic.EXECUTE_ALL
        and 0 < len(decisions) < expected
        and stops_batch(decisions[-1], semantic)
        and not any(stops_batch(decision, semantic) for decision in decisions[:-1])
    )
    if not (complete or stopped_early):
        raise PDPError(REASON_PDP_INVALID_RESPONSE, f"{len(decisions)} decisions for {expected} evaluations")
    return decisions
