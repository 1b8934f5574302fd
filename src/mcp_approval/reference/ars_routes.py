"""HTTP routes of the reference Access Request Service (ARAP §2.3-§2.9) and the JWK Set.

- ``POST <prefix>/access/v1/requests``: submit (``Authorization: Bearer <client token>``,
  optional ``Idempotency-Key``); ``202`` + ``Location``, or ``201`` with ``result`` when an
  automatic resolver decided at once.
- ``GET <prefix>/access/v1/requests/{id}``: status; ``Retry-After`` while pending.
- ``POST``/``DELETE <prefix>/access/v1/requests/{id}/cancel``: cancel (other methods: ``405``).
- ``GET <prefix>/.well-known/jwks.json``: the public keys of ``binding_token``/``approval.state``.

Errors are ``application/problem+json`` with ``type`` ``urn:openid:authzen:access-request:error:<code>``
(``about:blank`` for a plain ``400``/``401``).
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from mcp_approval.reference.ars import AccessRequestService, ArsAnswer
from mcp_approval.reference.ars_submission import ArapError, parse_submission
from mcp_approval.reference.signing import KeySet
from mcp_approval.web.bodies import BodyTooLargeError, JsonBodyError, parse_json_body, read_body
from mcp_approval.web.throttle import FailedLoginThrottle, TooManyFailuresError, bearer_caller

__all__ = ["JWKS_PATH", "MAX_BODY_BYTES", "REQUESTS_PATH", "ars_routes", "jwks_route", "token_authenticator"]

REQUESTS_PATH: Final = "/access/v1/requests"
JWKS_PATH: Final = "/.well-known/jwks.json"
#: The largest submission body accepted.
MAX_BODY_BYTES: Final = 64 * 1024
_MAX_KEY_CHARS: Final = 256


def token_authenticator(tokens: Mapping[str, str]) -> Callable[[str], Awaitable[str | None]]:
    """Maps a bearer token to its owner, comparing every known token in constant time."""
    known = dict(tokens)

    async def authenticate(token: str) -> str | None:
        found = None
        for candidate, owner in known.items():
            if hmac.compare_digest(candidate.encode(), token.encode()):
                found = owner
        return found

    return authenticate


def ars_routes(
    service: AccessRequestService,
    authenticate: Callable[[str], Awaitable[str | None]],
    *,
    prefix: str,
    throttle: FailedLoginThrottle | None = None,
) -> list[BaseRoute]:
    """The Access Request Service routes under ``prefix`` (the PDP base URL's path).

    ``throttle`` counts missing and wrong client tokens per client address (by default a new one in
    this process's memory); a client over its limit is answered ``429`` with ``Retry-After``.
    """
    limit = throttle or FailedLoginThrottle()

    async def caller_of(request: Request) -> str:
        try:
            caller = await bearer_caller(request, limit, authenticate)
        except TooManyFailuresError as exc:
            detail = "too many failed authentications from this address"
            raise ArapError(None, detail, status=429, headers={"Retry-After": str(exc.retry_after_s)}) from None
        if caller is None:
            raise ArapError(None, "a valid client bearer token is required", status=401)
        return caller

    async def submit(request: Request) -> ArsAnswer:
        caller = await caller_of(request)
        key = request.headers.get("idempotency-key")
        if key is not None and not 0 < len(key) <= _MAX_KEY_CHARS:
            raise ArapError(None, f"Idempotency-Key must be 1 to {_MAX_KEY_CHARS} characters")
        return await service.submit(caller, key, parse_submission(await _json_body(request)))

    async def status(request: Request) -> ArsAnswer:
        return await service.status(await caller_of(request), request.path_params["task_id"])

    async def cancel(request: Request) -> ArsAnswer:
        caller = await caller_of(request)
        return await service.cancel(caller, request.path_params["task_id"])

    return [
        Route(prefix + REQUESTS_PATH, _answering(submit), methods=["POST"]),
        Route(prefix + REQUESTS_PATH + "/{task_id}", _answering(status), methods=["GET"]),
        Route(prefix + REQUESTS_PATH + "/{task_id}/cancel", _answering(cancel), methods=["POST", "DELETE"]),
    ]


def jwks_route(keys: KeySet, *, prefix: str) -> Route:
    """``GET <prefix>/.well-known/jwks.json``."""
    document = keys.jwks()

    async def jwks(request: Request) -> Response:
        return JSONResponse(document, headers={"Cache-Control": "max-age=300"})

    return Route(prefix + JWKS_PATH, jwks, methods=["GET"])


def _answering(handler: Callable[[Request], Awaitable[ArsAnswer]]) -> Callable[[Request], Awaitable[Response]]:
    async def handle(request: Request) -> Response:
        try:
            answer = await handler(request)
        except ArapError as exc:
            headers = {**exc.headers, **({"WWW-Authenticate": "Bearer"} if exc.status == 401 else {})}
            return JSONResponse(
                exc.to_json(), status_code=exc.status, headers=headers, media_type="application/problem+json"
            )
        return JSONResponse(answer.body, status_code=answer.status, headers=dict(answer.headers))

    return handle


async def _json_body(request: Request) -> Any:
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/json" and not (
        media_type.startswith("application/") and media_type.endswith("+json")
    ):
        raise ArapError(None, "the request body must be application/json")
    try:
        raw = await read_body(request, MAX_BODY_BYTES)
    except BodyTooLargeError as exc:
        raise ArapError(None, str(exc), status=413) from None
    try:
        return parse_json_body(raw)
    except JsonBodyError as exc:
        raise ArapError(None, str(exc)) from None
