"""Per-tool authorization requirements, enforced before the call reaches the MCP server.

``mcp`` 2.3 checks one global scope list and its 403 names no ``scope=``; this ASGI middleware
reads each ``tools/call`` body (and the ``Mcp-Name`` header) and answers, for a tool whose
requirement the caller's token does not meet:

- 403 ``insufficient_scope`` with ``scope=`` and ``resource_metadata=`` when scopes are missing;
- 401 ``insufficient_authorization`` with a base64url ``authorization_remediation`` when the
  tool's RAR check asks for authorization details the token does not carry.

Install it inside the SDK's authentication middleware, where the access token is known::

    app = server.streamable_http_app()
    install_tool_authorization(app, {"files_update": ToolRequirement(scopes=frozenset({"write"}))},
                               resource_metadata_url=str(build_resource_metadata_url(resource_url)))

Without HTTP (stdio) the same :class:`Shortfall` travels as an envelope alone: :func:`shortfall_result`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import mcp_types as types
import pydantic_core
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp.shared.inbound import decode_header_value
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_approval.denials import challenges
from mcp_approval.denials.builders import credential_remediation, final_denial
from mcp_approval.denials.models import AuthorizationRemediation, Remediation
from mcp_approval.protocol import (
    CHALLENGE_INSUFFICIENT_AUTHORIZATION,
    CHALLENGE_INSUFFICIENT_SCOPE,
    CHALLENGE_INVALID_TOKEN,
    HEADER_MCP_NAME,
    METHOD_TOOLS_CALL,
)

__all__ = [
    "AuthorizationCheck",
    "Shortfall",
    "ToolAuthorizationMiddleware",
    "ToolRequirement",
    "assess",
    "install_tool_authorization",
    "shortfall_result",
]

logger = logging.getLogger("mcp_approval.denials")

AuthorizationCheck = Callable[[Mapping[str, Any], AccessToken], Awaitable[AuthorizationRemediation | None]]
"""Given a call's arguments and the caller's token, the remediation the call needs, or ``None`` if the token suffices.

It must judge the token against *these* arguments every time: details that merely resemble an
earlier denial's are not authorization for a different operation.
"""


@dataclass(frozen=True)
class ToolRequirement:
    """What a token must carry to call one tool: scopes, and optionally a RAR check."""

    scopes: frozenset[str] = frozenset()
    authorization: AuthorizationCheck | None = None


@dataclass(frozen=True)
class Shortfall:
    """Why a token does not meet a tool's requirement."""

    tool: str
    missing_scopes: frozenset[str]
    challenge_scopes: tuple[str, ...]
    remediation: AuthorizationRemediation | None = None


async def assess(
    requirement: ToolRequirement,
    *,
    tool: str,
    arguments: Mapping[str, Any],
    token: AccessToken,
    base_scopes: Sequence[str] = (),
) -> Shortfall | None:
    """Evaluate ``token`` for one call, afresh; ``None`` when it meets the requirement.

    Missing scopes are reported first; the challenge names ``base_scopes`` plus the tool's scopes.
    """
    missing = requirement.scopes - set(token.scopes)
    if missing:
        scopes = challenges.scope_tokens([*base_scopes, *sorted(requirement.scopes)])
        return Shortfall(tool=tool, missing_scopes=frozenset(missing), challenge_scopes=scopes)
    if requirement.authorization is not None:
        remediation = await requirement.authorization(arguments, token)
        if remediation is not None:
            return Shortfall(tool=tool, missing_scopes=frozenset(), challenge_scopes=(), remediation=remediation)
    return None


def shortfall_result(shortfall: Shortfall, *, context_id: str | None = None) -> types.CallToolResult:
    """The envelope-only form of a shortfall, for transports without challenges (stdio).

    An RAR shortfall is case 3 (``available`` with an ``authorization_remediation`` hint). A
    scope shortfall has no hint type to carry it, so it is ``undisclosed`` with the scopes
    named in the content.
    """
    if shortfall.remediation is not None:
        message = f"Current authorization is insufficient for {shortfall.tool}."
        return credential_remediation(message, shortfall.remediation, context_id=context_id)
    scopes = " ".join(sorted(shortfall.missing_scopes))
    message = f"{shortfall.tool} needs a credential that also grants: {scopes}."
    return final_denial(message, remediation=Remediation.UNDISCLOSED, context_id=context_id)


class ToolAuthorizationMiddleware:
    """ASGI middleware answering HTTP challenges for ``tools/call`` requests that miss a tool's requirement.

    Args:
        app: the wrapped application (inside the SDK's ``AuthenticationMiddleware``).
        requirements: tool name → requirement; unlisted tools pass.
        resource_metadata_url: the RFC 9728 metadata URL every challenge names.
        base_scopes: scopes every token needs (the server's global ones), named in each challenge.
        path: the MCP endpoint; other paths pass untouched.
        max_body_bytes: larger request bodies are answered 413 unread.
    """

    def __init__(
        self,
        app: ASGIApp,
        requirements: Mapping[str, ToolRequirement],
        *,
        resource_metadata_url: str,
        base_scopes: Sequence[str] = (),
        path: str = "/mcp",
        max_body_bytes: int = DEFAULT_MAX_REQUEST_BODY_SIZE,
    ) -> None:
        self.app = app
        self.requirements = dict(requirements)
        self.resource_metadata_url = resource_metadata_url
        self.base_scopes = challenges.scope_tokens(base_scopes)
        self.path = path.rstrip("/")
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the request's tool calls, then pass it on with its body replayed."""
        if not self._applies(scope):
            await self.app(scope, receive, send)
            return
        buffered = await _buffer_body(scope, receive, self.max_body_bytes)
        if buffered is None:
            await Response("Request body too large", status_code=413)(scope, receive, send)
            return
        body, replay = buffered
        response = await self._check(scope, body)
        await (response or self.app)(scope, replay, send)

    def _applies(self, scope: Scope) -> bool:
        return (
            scope["type"] == "http"
            and scope.get("method") == "POST"
            and bool(self.requirements)
            and str(scope.get("path", "")).rstrip("/") == self.path
        )

    async def _check(self, scope: Scope, body: bytes) -> Response | None:
        headers = Headers(scope=scope)
        for names, arguments in _tool_calls(body, decode_header_value(headers.get(HEADER_MCP_NAME))):
            for name in sorted(names):
                requirement = self.requirements.get(name)
                response = None if requirement is None else await self._enforce(scope, name, requirement, arguments)
                if response is not None:
                    return response
        return None

    async def _enforce(
        self, scope: Scope, name: str, requirement: ToolRequirement, arguments: Mapping[str, Any]
    ) -> Response | None:
        token = _access_token(scope)
        if token is None:
            presented = bool(Headers(scope=scope).get("authorization", "").strip())
            return self._unauthenticated(requirement, credentials=presented)
        shortfall = await assess(requirement, tool=name, arguments=arguments, token=token, base_scopes=self.base_scopes)
        if shortfall is None:
            return None
        logger.info("tools/call %r denied at HTTP: %s", name, _describe(shortfall))
        return self._challenge(shortfall)

    def _unauthenticated(self, requirement: ToolRequirement, *, credentials: bool) -> Response:
        scopes = [*self.base_scopes, *sorted(requirement.scopes)]
        header = challenges.authentication_required(
            scopes, resource_metadata=self.resource_metadata_url, credentials_presented=credentials
        )
        return _challenge_response(401, header, CHALLENGE_INVALID_TOKEN, "Authentication required")

    def _challenge(self, shortfall: Shortfall) -> Response:
        if shortfall.remediation is not None:
            description = "Additional authorization is required"
            header = challenges.insufficient_authorization(
                shortfall.remediation, resource_metadata=self.resource_metadata_url, description=description
            )
            return _challenge_response(401, header, CHALLENGE_INSUFFICIENT_AUTHORIZATION, description)
        description = f"The tool {shortfall.tool} needs more scopes"
        header = challenges.insufficient_scope(
            shortfall.challenge_scopes, resource_metadata=self.resource_metadata_url, description=description
        )
        return _challenge_response(403, header, CHALLENGE_INSUFFICIENT_SCOPE, description)


def install_tool_authorization(
    app: Starlette,
    requirements: Mapping[str, ToolRequirement],
    *,
    resource_metadata_url: str,
    base_scopes: Sequence[str] = (),
    path: str = "/mcp",
) -> None:
    """Add :class:`ToolAuthorizationMiddleware` innermost of ``app``'s middleware (after the SDK's auth)."""
    if app.middleware_stack is not None:
        raise RuntimeError("install_tool_authorization must run before the application starts")
    app.user_middleware.append(
        Middleware(
            ToolAuthorizationMiddleware,
            requirements=requirements,
            resource_metadata_url=resource_metadata_url,
            base_scopes=base_scopes,
            path=path,
        )
    )


def _access_token(scope: Scope) -> AccessToken | None:
    user = scope.get("user")
    if isinstance(user, AuthenticatedUser):
        return user.access_token
    return get_access_token()


def _challenge_response(status: int, header: str, error: str, description: str) -> Response:
    return JSONResponse(
        {"error": error, "error_description": description},
        status_code=status,
        headers={"WWW-Authenticate": header, "Cache-Control": "no-store"},
    )


def _describe(shortfall: Shortfall) -> str:
    if shortfall.remediation is not None:
        return "authorization details required"
    return "missing scopes " + " ".join(sorted(shortfall.missing_scopes))


async def _buffer_body(scope: Scope, receive: Receive, limit: int) -> tuple[bytes, Receive] | None:
    """The whole request body and a ``receive`` that replays it; ``None`` past ``limit`` bytes."""
    declared = Headers(scope=scope).get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    body = bytearray()
    queued: list[Message] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            queued.append(message)
            break
        body.extend(message.get("body", b""))
        if len(body) > limit:
            return None
        if not message.get("more_body", False):
            break
    queued.insert(0, {"type": "http.request", "body": bytes(body), "more_body": False})

    async def replay() -> Message:
        return queued.pop(0) if queued else await receive()

    return bytes(body), replay


def _tool_calls(body: bytes, header_name: str | None) -> list[tuple[frozenset[str], Mapping[str, Any]]]:
    """Each ``tools/call`` in the body: the names it could run (body and header) and its arguments.

    The body is read with both JSON parsers the SDK uses, so no parser difference lets a call
    through unseen; a batch is checked element by element.
    """
    calls: list[tuple[frozenset[str], Mapping[str, Any]]] = []
    for payload in _decodings(body):
        for message in payload if isinstance(payload, list) else [payload]:
            if not isinstance(message, dict) or message.get("method") != METHOD_TOOLS_CALL:
                continue
            params = message.get("params")
            params = params if isinstance(params, dict) else {}
            names = {params["name"]} if isinstance(params.get("name"), str) else set()
            if header_name is not None:
                names.add(header_name)
            arguments = params.get("arguments")
            calls.append((frozenset(names), arguments if isinstance(arguments, dict) else {}))
    return calls


def _decodings(body: bytes) -> Iterable[Any]:
    decoded: list[Any] = []
    for parse in (json.loads, pydantic_core.from_json):
        try:
            decoded.append(parse(body))
        except (ValueError, RecursionError):
            continue
    return decoded
