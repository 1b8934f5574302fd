"""Servers for the SEP-2643 tests: a resource server with per-tool requirements, and a denials server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import mcp_types as types
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.routes import build_resource_metadata_url
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context, MCPServer
from pydantic import AnyHttpUrl
from starlette.applications import Starlette

from mcp_approval.checks.wire import Wire
from mcp_approval.denials import (
    AuthorizationReferences,
    AuthorizationRemediation,
    Interaction,
    Placement,
    Remediation,
    ToolRequirement,
    assess,
    canonical_details,
    choose_placement,
    final_denial,
    install_tool_authorization,
    new_context_id,
    note_retry,
    operation_executing,
    ordinary_failure,
    remediation_for,
    shortfall_result,
    url_interaction,
)
from mcp_approval.denials.builders import EnvelopeAfterExecutionError

BASE_URL = "http://127.0.0.1:8000"
RESOURCE_URL = f"{BASE_URL}/mcp"
RESOURCE_METADATA = str(build_resource_metadata_url(AnyHttpUrl(RESOURCE_URL)))
REFERENCES = AuthorizationReferences(b"reference-key-for-tests-only-0123456789")


def payment_details(arguments: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The RFC 9396 details a ``payments_initiate`` call needs, built from the call itself."""
    return [
        {
            "type": "payment_initiation",
            "actions": ["initiate", "status", "cancel"],
            "instructedAmount": {"currency": arguments.get("currency"), "amount": arguments.get("amount")},
            "creditorName": arguments.get("creditorName"),
        }
    ]


def token(name: str, scopes: list[str], details: list[dict[str, Any]] | None = None) -> AccessToken:
    claims = {"authorization_details": details} if details is not None else None
    return AccessToken(token=name, client_id="agent", subject="alice", scopes=scopes, claims=claims)


PAY_123 = {"amount": "123.50", "currency": "EUR", "creditorName": "Merchant A"}
TOKENS = {
    "reader": token("reader", ["read"]),
    "writer": token("writer", ["read", "write"]),
    "payer": token("payer", ["read", "payments"]),
    "payer-123": token("payer-123", ["read", "payments"], payment_details(PAY_123)),
}


class Verifier:
    """The test tokens above."""

    async def verify_token(self, value: str) -> AccessToken | None:
        return TOKENS.get(value)


async def payment_check(arguments: Mapping[str, Any], held: AccessToken) -> AuthorizationRemediation | None:
    """Held details must equal what *this* call needs; a single-use credential, so no reference."""
    needed = payment_details(arguments)
    carried = (held.claims or {}).get("authorization_details")
    try:
        if carried is not None and canonical_details(carried) == canonical_details(needed):
            return None
    except ValueError:
        pass
    return remediation_for(needed, single_use=True)


REQUIREMENTS = {
    "files_update": ToolRequirement(scopes=frozenset({"write"})),
    "payments_initiate": ToolRequirement(scopes=frozenset({"payments"}), authorization=payment_check),
}


@dataclass
class Executions:
    """Which tools actually ran, in order."""

    names: list[str] = field(default_factory=list)


def build_resource_server() -> tuple[MCPServer[Any], Starlette, Executions]:
    """An RS whose tools need per-tool scopes and (for payments) RAR authorization details."""
    ran = Executions()
    server: MCPServer[Any] = MCPServer(
        "denials-rs",
        token_verifier=Verifier(),
        auth=AuthSettings(
            issuer_url=AnyHttpUrl(BASE_URL),
            resource_server_url=AnyHttpUrl(RESOURCE_URL),
            required_scopes=["read"],
            validate_token_resource=False,
        ),
        log_level="WARNING",
    )

    @server.tool()
    async def files_get(file_id: str) -> str:
        ran.names.append("files_get")
        return f"contents of {file_id}"

    @server.tool()
    async def files_update(file_id: str, content: str) -> str:
        ran.names.append("files_update")
        return f"updated {file_id}"

    @server.tool()
    async def payments_initiate(amount: str, currency: str, creditorName: str) -> str:
        ran.names.append("payments_initiate")
        return f"paid {amount} {currency} to {creditorName}"

    app = server.streamable_http_app(json_response=True)
    install_tool_authorization(app, REQUIREMENTS, resource_metadata_url=RESOURCE_METADATA, base_scopes=["read"])
    return server, app, ran


@dataclass
class ServerState:
    """Server-side state of the denials server: approvals granted, credentials held, tools run."""

    approved: set[str] = field(default_factory=set)
    held_details: list[dict[str, Any]] | None = None
    ran: list[str] = field(default_factory=list)
    echoed: list[str | None] = field(default_factory=list)


def build_denials_server(state: ServerState) -> MCPServer[Any]:
    """A server (no HTTP auth) whose tools deny in each envelope placement; reachable by any transport."""
    server: MCPServer[Any] = MCPServer("denials-server", log_level="WARNING")

    @server.tool()
    async def open_folder(folder: str, ctx: Context) -> types.CallToolResult | types.InputRequiredResult:
        """Needs a folder approval the user gives at a URL (Use Case 1, interaction 1)."""
        state.echoed.append(note_retry(ctx.request_context.meta, operation="open_folder"))
        if ctx.input_responses is not None:
            answer = ctx.input_responses.get("authorization")
            if isinstance(answer, types.ElicitResult) and answer.action == "accept":
                state.approved.add(folder)  # what the approval page would have recorded
        if folder in state.approved:  # a fresh evaluation on every call, whatever was echoed
            state.ran.append(f"open_folder:{folder}")
            return types.CallToolResult(content=[types.TextContent(type="text", text=f"opened {folder}")])
        placement = choose_placement(ctx.client_capabilities, [Interaction.URL], protocol_version=ctx.protocol_version)
        if placement is Placement.URL_INTERACTION:
            return url_interaction(
                url=f"https://mcp.example.com/approve-folder-access?folder={folder}",
                message="Open this page to approve access to the requested folder.",
                context_id=new_context_id(),
            )
        return final_denial(
            f"Access to {folder} needs an approval. Ask the folder owner to grant it, then call again.",
            remediation=Remediation(placement.value),
            context_id=new_context_id(),
        )

    @server.tool()
    async def echoes() -> list[str | None]:
        """The context ids echoed so far (for tests that cannot see this process's state)."""
        return state.echoed

    @server.tool()
    async def workspace() -> types.CallToolResult:
        """A final denial (case 4, unavailable)."""
        return final_denial(
            "You do not have access to this workspace.",
            remediation=Remediation.UNAVAILABLE,
            context_id="authzctx_2b7e9c",
        )

    @server.tool()
    async def payments_initiate(
        amount: str,
        currency: str,
        creditorName: str,
        ctx: Context,
    ) -> types.CallToolResult:
        """Checks the details the server's own credential carries (as on stdio): case 3 when they fall short."""
        state.echoed.append(note_retry(ctx.request_context.meta, operation="payments_initiate"))
        arguments = {"amount": amount, "currency": currency, "creditorName": creditorName}
        held = token("env", ["payments"], state.held_details)
        shortfall = await assess(
            REQUIREMENTS["payments_initiate"], tool="payments_initiate", arguments=arguments, token=held
        )
        if shortfall is not None:
            return shortfall_result(shortfall, context_id=new_context_id())
        state.ran.append("payments_initiate")
        return types.CallToolResult(content=[types.TextContent(type="text", text="paid")])

    @server.tool()
    async def files_update(file_id: str) -> types.CallToolResult:
        """A scope shortfall without a transport challenge: undisclosed, scopes named in the text."""
        shortfall = await assess(
            REQUIREMENTS["files_update"], tool="files_update", arguments={"file_id": file_id}, token=token("env", [])
        )
        assert shortfall is not None
        return shortfall_result(shortfall)

    @server.tool()
    async def half_done() -> types.CallToolResult:
        """Fails after its operation began: an ordinary failure, whatever the code tries."""
        with operation_executing():
            state.ran.append("half_done:started")
            try:
                return final_denial("denied midway", remediation=Remediation.UNAVAILABLE)
            except EnvelopeAfterExecutionError:
                return ordinary_failure("The operation failed after it started; some changes may have been made.")

    return server


@asynccontextmanager
async def http_wire(
    server: MCPServer[Any], app: Starlette | None = None, *, token_: str | None = None
) -> AsyncIterator[Wire]:
    """``server`` over streamable HTTP, in process (ASGI), as a :class:`Wire`."""
    app = app if app is not None else server.streamable_http_app(json_response=True)
    transport = httpx.ASGITransport(app=app)
    async with server.session_manager.run(), httpx.AsyncClient(transport=transport, base_url=BASE_URL) as http:
        yield Wire(http, token=token_)
