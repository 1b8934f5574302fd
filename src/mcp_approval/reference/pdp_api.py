"""A reference AuthZEN Authorization API 1.0 PDP over HTTP, on any :class:`PolicyDecisionPoint`.

A thin HTTP layer: it parses and validates the wire messages, applies the batch defaults and
semantics, and leaves every decision to the ``PolicyDecisionPoint`` it wraps.

Routes (``<path>`` is the path of ``base_url``, empty for a PDP at the host root; as AuthZEN §9
puts it, the well-known segment goes between host and path):

- ``GET /.well-known/authzen-configuration<path>``: the PDP metadata (``policy_decision_point``,
  ``access_evaluation_endpoint``, ``access_evaluations_endpoint``, and, when an Access Request
  Service is named, ``access_request_endpoint`` with the ARAP capability URN; ``jwks_uri`` when given).
- ``POST <path>/access/v1/evaluation``: one decision (AuthZEN §6); a deny is ``200 {"decision": false}``.
- ``POST <path>/access/v1/evaluations``: a batch (AuthZEN §7). Top-level ``subject``, ``action``,
  ``resource`` and ``context`` are defaults an entry replaces whole; ``options.evaluations_semantic``
  is ``execute_all`` (default), ``deny_on_first_deny`` or ``permit_on_first_permit`` (the answer
  then ends with the first deny / permit). An entry that is ill-formed, or incomplete after the
  defaults, is a ``decision: false`` with ``reason: invalid_request`` and an ``error`` in its
  context; the others are still decided, in request order. Without ``evaluations`` (or with an
  empty list) the endpoint answers exactly like the single one.

Errors are RFC 9457 ``application/problem+json``: ``400`` for a body that is not JSON, not a JSON
object, or not a valid (top-level) request (missing or ill-typed ``subject``/``action``/``resource``);
also ``400`` (as the AuthZEN certification scenario requires) for a ``Content-Type`` other than
``application/json`` (or ``application/*+json``). Unknown members are ignored. A
``PolicyDecisionPoint`` that raises (the protocol says it should not) makes the exchange a
``500``, never a permit: the whole request fails closed.

``X-Request-ID`` is echoed unchanged on every response of these routes (errors included), and by
:func:`pdp_app` on every response of the app. There is no authentication: an ``Authorization``
header (the Todo interop runner sends ``Authorization: undefined``) is ignored. ``http`` base URLs
are accepted for local use; AuthZEN expects ``https`` in deployment.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar
from urllib.parse import urlsplit

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_approval.errors import MCPApprovalError
from mcp_approval.policy.http import EVALUATION_PATH, EVALUATIONS_PATH, REQUEST_ID_HEADER, WELL_KNOWN
from mcp_approval.policy.models import (
    BatchItemError,
    EvaluationItem,
    EvaluationRequest,
    EvaluationsRequest,
    PDPMetadata,
)
from mcp_approval.policy.pdp import PolicyDecisionPoint, decide_resolved
from mcp_approval.protocol import ARAP_CAPABILITY
from mcp_approval.web.bodies import BodyTooLargeError, JsonBodyError, parse_json_body, read_body

__all__ = [
    "ACCESS_REQUEST_CAPABILITY",
    "MAX_EVALUATION_BYTES",
    "MAX_LISTED_ERRORS",
    "EchoRequestIdMiddleware",
    "pdp_app",
    "pdp_metadata",
    "pdp_routes",
    "problem",
]

logger = logging.getLogger("mcp_approval.reference")

#: The ARAP capability advertised when an Access Request endpoint is named (ARAP §5, discovery).
ACCESS_REQUEST_CAPABILITY: Final = ARAP_CAPABILITY
#: How many validation errors a ``400`` detail lists at most.
MAX_LISTED_ERRORS: Final = 5
#: The longest evaluation request body accepted (a batch of evaluations included); longer is a 413.
MAX_EVALUATION_BYTES: Final = 1024 * 1024
_TITLES: Final = {400: "Bad Request", 413: "Content Too Large", 500: "Internal Server Error"}
_REQUEST_ID_BYTES: Final = REQUEST_ID_HEADER.lower().encode("latin-1")


class _Problem(MCPApprovalError):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def problem(status: int, detail: str) -> Response:
    """An RFC 9457 ``application/problem+json`` response."""
    body = {"type": "about:blank", "title": _TITLES.get(status, "Error"), "status": status, "detail": detail}
    return JSONResponse(body, status_code=status, media_type="application/problem+json")


def pdp_metadata(
    base_url: str, *, access_request_endpoint: str | None = None, jwks_uri: str | None = None
) -> PDPMetadata:
    """The metadata document of the PDP identified by ``base_url`` (AuthZEN §9, ARAP additions).

    ``jwks_uri`` is published when the PDP signs or verifies JWS (``binding_token``, ``approval.state``).

    Raises:
        ValueError: ``base_url`` is not an absolute ``http(s)`` URL without query or fragment.
    """
    identifier, _ = _identifier(base_url)
    extra: dict[str, Any] = {}
    if access_request_endpoint is not None:
        extra = {"access_request_endpoint": access_request_endpoint, "capabilities": [ACCESS_REQUEST_CAPABILITY]}
    if jwks_uri is not None:
        extra["jwks_uri"] = jwks_uri
    return PDPMetadata(
        policy_decision_point=identifier,
        access_evaluation_endpoint=identifier + EVALUATION_PATH,
        access_evaluations_endpoint=identifier + EVALUATIONS_PATH,
        **extra,
    )


def pdp_routes(
    pdp: PolicyDecisionPoint,
    *,
    base_url: str,
    access_request_endpoint: str | None = None,
    jwks_uri: str | None = None,
) -> list[BaseRoute]:
    """The AuthZEN PDP routes over ``pdp`` (see the module docstring).

    Args:
        pdp: what decides; this layer never decides itself.
        base_url: the PDP identifier published as ``policy_decision_point`` (the URL clients use,
            e.g. ``http://127.0.0.1:8080`` or ``https://pdp.example.com/tenant``); its path, if
            any, prefixes the evaluation routes and suffixes the well-known one.
        access_request_endpoint: the Access Request Service's submit URL, published as is.
        jwks_uri: where the PDP's JWS keys are published (served by the caller), published as is.

    Raises:
        ValueError: ``base_url`` is not an absolute ``http(s)`` URL without query or fragment.
    """
    _, prefix = _identifier(base_url)
    metadata = pdp_metadata(base_url, access_request_endpoint=access_request_endpoint, jwks_uri=jwks_uri).to_wire()

    async def configuration(request: Request) -> Response:
        return JSONResponse(metadata)

    async def evaluation(request: Request) -> Response:
        body = await _json_object(request)
        decision = await _decided(pdp.evaluate(_parse(EvaluationRequest, body)))
        return JSONResponse(decision.to_wire())

    async def evaluations(request: Request) -> Response:
        body = await _json_object(request)
        items = body.get("evaluations")
        if items is not None and not isinstance(items, list):
            raise _Problem(400, "invalid request: evaluations: must be an array")
        defaults = _parse(EvaluationsRequest, {key: value for key, value in body.items() if key != "evaluations"})
        if not items:  # AuthZEN §7.1: behaves exactly like the single endpoint
            decision = await _decided(pdp.evaluate(_parse(EvaluationRequest, body)))
            return JSONResponse(decision.to_wire())
        decisions = await _decided(decide_resolved(pdp, _resolve(defaults, items), defaults.semantic))
        return JSONResponse({"evaluations": [decision.to_wire() for decision in decisions]})

    return [
        Route(WELL_KNOWN + prefix, _endpoint(configuration), methods=["GET"]),
        Route(prefix + EVALUATION_PATH, _endpoint(evaluation), methods=["POST"]),
        Route(prefix + EVALUATIONS_PATH, _endpoint(evaluations), methods=["POST"]),
    ]


def pdp_app(pdp: PolicyDecisionPoint, *, base_url: str, access_request_endpoint: str | None = None) -> Starlette:
    """A Starlette app serving :func:`pdp_routes`, echoing ``X-Request-ID`` on every response (404s included).

    Serve it with uvicorn, e.g. ``uvicorn.run(pdp_app(pdp, base_url="http://127.0.0.1:8080"), port=8080)``.
    """
    routes = pdp_routes(pdp, base_url=base_url, access_request_endpoint=access_request_endpoint)
    return Starlette(routes=routes, middleware=[Middleware(EchoRequestIdMiddleware)])


class EchoRequestIdMiddleware:
    """ASGI middleware copying a request's ``X-Request-ID`` unchanged onto its response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on; add the echo to the response start."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = next((value for name, value in scope["headers"] if name == _REQUEST_ID_BYTES), None)
        if request_id is None:
            await self.app(scope, receive, send)
            return

        async def send_with_echo(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers[REQUEST_ID_HEADER] = request_id.decode("latin-1")
            await send(message)

        await self.app(scope, receive, send_with_echo)


def _identifier(base_url: str) -> tuple[str, str]:
    """``base_url`` without a trailing slash, and its path (the route prefix)."""
    identifier = base_url.rstrip("/")
    parts = urlsplit(identifier)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise ValueError(f"base_url must be an absolute http(s) URL without query or fragment: {base_url!r}")
    return identifier, parts.path


def _endpoint(handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
    """``handler`` with :class:`_Problem` turned into its response and ``X-Request-ID`` echoed."""

    async def handle(request: Request) -> Response:
        try:
            response = await handler(request)
        except _Problem as exc:
            response = problem(exc.status, exc.detail)
        request_id = request.headers.get(REQUEST_ID_HEADER)
        if request_id is not None:
            response.headers[REQUEST_ID_HEADER] = request_id
        return response

    return handle


async def _json_object(request: Request) -> dict[str, Any]:
    """The request body as a JSON object, or the ``400`` that says why not."""
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    is_json = media_type == "application/json" or (
        media_type.startswith("application/") and media_type.endswith("+json")
    )
    if not is_json:
        # AuthZEN certification (c-2-4-3): a wrong content type is a 400, not a 415.
        raise _Problem(400, "the request body must be application/json")
    try:
        raw = await read_body(request, MAX_EVALUATION_BYTES)
    except BodyTooLargeError as exc:
        raise _Problem(413, str(exc)) from None
    if not raw.strip():
        raise _Problem(400, "the request body is empty")
    try:
        body: Any = parse_json_body(raw)
    except JsonBodyError as exc:
        raise _Problem(400, str(exc)) from None
    if not isinstance(body, dict):
        raise _Problem(400, "the request body must be a JSON object")
    return body


_Model = TypeVar("_Model", EvaluationRequest, EvaluationsRequest)


def _parse(model: type[_Model], body: dict[str, Any]) -> _Model:
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise _Problem(400, f"invalid request: {_summary(exc)}") from None


def _summary(exc: ValidationError) -> str:
    """The validation errors as ``location: message`` pairs (the input values are not echoed)."""
    errors = exc.errors()
    pairs = (f"{'.'.join(str(part) for part in e['loc']) or 'body'}: {e['msg']}" for e in errors[:MAX_LISTED_ERRORS])
    listed = "; ".join(pairs)
    return listed + (f"; and {len(errors) - MAX_LISTED_ERRORS} more" if len(errors) > MAX_LISTED_ERRORS else "")


def _resolve(defaults: EvaluationsRequest, items: list[Any]) -> list[EvaluationRequest | BatchItemError]:
    """Every entry of ``items`` as a complete request or as its error, in order.

    Well-formed entries are completed by :meth:`EvaluationsRequest.resolve`; an entry that is not a
    valid evaluation object stands in as an empty one there and is then replaced by its error.
    """
    parsed: list[EvaluationItem | BatchItemError] = []
    for index, item in enumerate(items):
        try:
            parsed.append(EvaluationItem.model_validate(item))
        except ValidationError as exc:
            parsed.append(BatchItemError(index=index, message=f"evaluation {index} is ill-formed: {_summary(exc)}"))
    stand_ins = [entry if isinstance(entry, EvaluationItem) else EvaluationItem() for entry in parsed]
    resolved = defaults.model_copy(update={"evaluations": stand_ins}).resolve()
    return [entry if isinstance(entry, BatchItemError) else done for entry, done in zip(parsed, resolved, strict=True)]


_Result = TypeVar("_Result")


async def _decided(pending: Awaitable[_Result]) -> _Result:
    """The PDP's answer; a PDP that raises fails the exchange closed with a ``500``."""
    try:
        return await pending
    except Exception:
        logger.exception("the policy decision point failed; answering 500")
        raise _Problem(500, "the policy decision point failed; no decision was made") from None
