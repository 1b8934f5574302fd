"""A gated server for the approval-gate tests: tools that count their executions, a Cedar policy."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from mcp.server.mcpserver import MCPServer

from mcp_approval.approval import PolicyGate
from mcp_approval.checks.wire import Wire
from mcp_approval.policy import CedarPDP, Decision, EvaluationRequest, EvaluationsSemantic, PolicyDecisionPoint
from mcp_approval.server.auth import StaticTokenVerifier, local_auth_settings

BASE_URL = "http://127.0.0.1:8000"
POLICY = Path(__file__).with_name("policy.cedar")
TOKENS = {"alice-token": "alice", "bob-token": "bob"}


def cedar_pdp() -> CedarPDP:
    """The PDP of these tests: ``policy.cedar`` next to this file."""
    return CedarPDP.from_files(POLICY)


class FixedPDP:
    """A PDP that gives one decision to everything, or raises ``error``; records what it was asked."""

    def __init__(self, decision: Decision | None = None, *, error: Exception | None = None) -> None:
        self.decision = decision or Decision.permit()
        self.error = error
        self.requests: list[EvaluationRequest] = []

    async def evaluate(self, request: EvaluationRequest) -> Decision:
        self.requests.append(request)
        if self.error is not None:
            raise self.error
        return self.decision

    async def evaluate_many(
        self, requests: Any, semantic: EvaluationsSemantic = EvaluationsSemantic.EXECUTE_ALL
    ) -> list[Decision]:
        return [await self.evaluate(request) for request in requests]


def build_gated_server(
    pdp: PolicyDecisionPoint, ran: Counter[str], *, tokens: bool = False, **gate_options: Any
) -> MCPServer[Any]:
    """A server whose tools record each execution in ``ran``, behind a :class:`PolicyGate` on ``pdp``."""
    auth: dict[str, Any] = {}
    if tokens:
        auth = {"token_verifier": StaticTokenVerifier(TOKENS), "auth": local_auth_settings(BASE_URL)}
    server: MCPServer[Any] = MCPServer(
        "gated", extensions=[PolicyGate(pdp, **gate_options)], log_level="WARNING", **auth
    )

    @server.tool()
    async def echo(text: str) -> str:
        ran["echo"] += 1
        return text

    @server.tool()
    async def deploy(env: str) -> str:
        ran["deploy"] += 1
        return f"deployed to {env}"

    @server.tool()
    async def drop_table(table: str) -> str:
        ran["drop_table"] += 1
        return f"dropped {table}"

    @server.tool()
    async def executions() -> dict[str, int]:
        """How often each tool ran (for tests that cannot see the server's process)."""
        return dict(ran)

    return server


@asynccontextmanager
async def http_wire(server: MCPServer[Any], *, token: str | None = None) -> AsyncIterator[Wire]:
    """``server`` over streamable HTTP, in process (ASGI), as a :class:`Wire`."""
    app = server.streamable_http_app(json_response=True)
    transport = httpx.ASGITransport(app=app)
    async with server.session_manager.run(), httpx.AsyncClient(transport=transport, base_url=BASE_URL) as http:
        yield Wire(http, token=token)
