"""A gated server over in-process HTTP whose requests are recorded, for the authorizing-caller tests."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import MCPServer
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_approval.approval import PolicyGate
from mcp_approval.policy import Decision, EvaluationRequest, EvaluationsSemantic
from mcp_approval.protocol import META_AUTHORIZATION
from mcp_approval.server.auth import StaticTokenVerifier, local_auth_settings

BASE_URL = "http://127.0.0.1:8000"
TOKENS = {"alice-token": "alice", "alice-payments-token": "alice+payments", "eve-token": "eve"}
DETAILS = [{"type": "payment_initiation", "instructedAmount": {"currency": "EUR", "amount": "5.00"}}]

Rule = Callable[[str], Decision]
"""The decision for one subject."""


def needs_payment_details(subject: str) -> Decision:
    """Permit a credential that carries the payment details; otherwise ask for them (case 3)."""
    if subject == "alice+payments":
        return Decision.permit()
    return Decision.deny("insufficient_authorization", authorization_details=DETAILS)


RULES: dict[str, Rule] = {
    "pay": needs_payment_details,
    "always_remediable": lambda subject: Decision.deny("insufficient_authorization", authorization_details=DETAILS),
    "drop_table": lambda subject: Decision.deny(),  # final: unavailable
    "deploy": lambda subject: Decision.deny("insufficient_scope", missing_scopes=["deploy:write"]),  # undisclosed
}


class RulePDP:
    """A PDP deciding each tool by its rule in :data:`RULES` (permit when it has none); records requests."""

    def __init__(self) -> None:
        self.requests: list[EvaluationRequest] = []

    async def evaluate(self, request: EvaluationRequest) -> Decision:
        self.requests.append(request)
        rule = RULES.get(request.resource.id)
        return rule(request.subject.id) if rule is not None else Decision.permit()

    async def evaluate_many(
        self, requests: Any, semantic: EvaluationsSemantic = EvaluationsSemantic.EXECUTE_ALL
    ) -> list[Decision]:
        return [await self.evaluate(request) for request in requests]


def build_server(ran: Counter[str]) -> MCPServer[Any]:
    """Tools that count their executions, behind a :class:`PolicyGate` on :class:`RulePDP`."""
    server: MCPServer[Any] = MCPServer(
        "authorizing",
        extensions=[PolicyGate(RulePDP())],
        token_verifier=StaticTokenVerifier(TOKENS),
        auth=local_auth_settings(BASE_URL),
        log_level="WARNING",
    )

    @server.tool()
    async def pay(amount: str) -> str:
        ran["pay"] += 1
        return f"paid {amount}"

    @server.tool()
    async def always_remediable() -> str:
        ran["always_remediable"] += 1
        return "ran"

    @server.tool()
    async def drop_table(table: str) -> str:
        ran["drop_table"] += 1
        return f"dropped {table}"

    @server.tool()
    async def deploy(env: str) -> str:
        ran["deploy"] += 1
        return f"deployed to {env}"

    @server.tool()
    async def garbled() -> types.CallToolResult:
        """Allowed, but answers with an ill-formed envelope."""
        ran["garbled"] += 1
        envelope = {"reason": 5, "remediation": "maybe"}
        return types.CallToolResult(
            content=[types.TextContent(type="text", text="odd")], is_error=True, _meta={META_AUTHORIZATION: envelope}
        )

    @server.tool()
    async def unknown_hints() -> types.CallToolResult:
        """An ``available`` denial whose only hint is of a type no client knows."""
        ran["unknown_hints"] += 1
        envelope = {
            "reason": "insufficient_authorization",
            "remediation": "available",
            "remediationHints": [{"type": "ciba", "binding_message": "approve on your phone"}],
        }
        return types.CallToolResult(
            content=[types.TextContent(type="text", text="denied")], is_error=True, _meta={META_AUTHORIZATION: envelope}
        )

    return server


@dataclass
class SentCall:
    """One ``tools/call`` as the server received it."""

    name: str
    meta: dict[str, Any]
    authorization: str | None
    params: dict[str, Any] = field(default_factory=dict)
    reply: dict[str, Any] | None = None
    """The JSON-RPC ``result`` the server answered with (JSON responses only)."""


@dataclass
class Recorder:
    """ASGI middleware recording every ``tools/call`` POST before the server sees it."""

    app: ASGIApp
    calls: list[SentCall] = field(default_factory=list)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        call = self._record(scope, body)
        replayed = False
        reply = b""

        async def keep_reply(message: Message) -> None:
            nonlocal reply
            if call is not None and message["type"] == "http.response.body":
                reply += message.get("body", b"")
                if not message.get("more_body", False):
                    call.reply = _result_of(reply)
            await send(message)

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, keep_reply)

    def _record(self, scope: Scope, body: bytes) -> SentCall | None:
        try:
            document = json.loads(body)
        except ValueError:
            return None
        if not isinstance(document, dict) or document.get("method") != "tools/call":
            return None
        params = document.get("params") or {}
        headers = {key.decode().lower(): value.decode() for key, value in scope["headers"]}
        call = SentCall(params.get("name"), params.get("_meta") or {}, headers.get("authorization"), params)
        self.calls.append(call)
        return call

    def of(self, name: str) -> list[SentCall]:
        """The recorded calls of tool ``name``."""
        return [call for call in self.calls if call.name == name]


def _result_of(body: bytes) -> dict[str, Any] | None:
    try:
        document = json.loads(body)
    except ValueError:
        return None
    result = document.get("result") if isinstance(document, dict) else None
    return result if isinstance(result, dict) else None


@asynccontextmanager
async def serving(
    server: MCPServer[Any], *, headers: dict[str, str] | None = None, **client_options: Any
) -> AsyncIterator[tuple[Client, httpx2.AsyncClient, Recorder]]:
    """An SDK client over streamable HTTP (in process, JSON responses) to ``server``, its HTTP client, the recorder."""
    recorder = Recorder(server.streamable_http_app(json_response=True))
    transport = httpx2.ASGITransport(app=recorder)
    async with (
        server.session_manager.run(),
        httpx2.AsyncClient(transport=transport, base_url=BASE_URL, headers=headers) as http,
    ):
        wire = streamable_http_client(f"{BASE_URL}/mcp", http_client=http)
        async with Client(wire, **client_options) as client:
            yield client, http, recorder


@asynccontextmanager
async def connected(
    ran: Counter[str], *, token: str = "alice-token", **client_options: Any
) -> AsyncIterator[tuple[Client, httpx2.AsyncClient, Recorder]]:
    """An SDK client over streamable HTTP (in process) to :func:`build_server`, its HTTP client, the recorder."""
    headers = {"Authorization": f"Bearer {token}"}
    async with serving(build_server(ran), headers=headers, **client_options) as connection:
        yield connection
