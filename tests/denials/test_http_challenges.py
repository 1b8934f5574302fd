"""Case 5 over real HTTP: per-tool scope (403) and RAR (401) challenges from the middleware, in front of MCPServer."""

from __future__ import annotations

import base64
import json

import httpx
import pytest
from mcp.client.auth.utils import extract_resource_metadata_from_www_auth, extract_scope_from_www_auth

from mcp_approval.checks.wire import envelope
from mcp_approval.client.denials import read_challenge
from mcp_approval.denials import decode_remediation
from tests.denials.support import PAY_123, RESOURCE_METADATA, build_resource_server, http_wire, payment_details

pytestmark = pytest.mark.anyio

CONTEXT_KEY = "io.modelcontextprotocol/authorization-context-id"


def sdk_view(reply_status: int, header: str) -> httpx.Response:
    """The challenge as the SDK's own OAuth client parses it (an independent parser)."""
    return httpx.Response(reply_status, headers={"WWW-Authenticate": header})


async def post(wire, payload: bytes, **headers: str | None) -> httpx.Response:
    sent = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": "2026-07-28",
        "authorization": f"Bearer {wire.token}",
        **headers,
    }
    sent = {name: value for name, value in sent.items() if value is not None}
    return await wire.http.post("/mcp", content=payload, headers=sent)


@pytest.mark.sep_check("sep-2643-server-scope-challenge", "sep-2643-challenge-means-available")
async def test_missing_tool_scope_is_a_403_naming_the_scopes_and_metadata():
    server, app, ran = build_resource_server()
    async with http_wire(server, app, token_="reader") as wire:
        response = await wire.http.post(
            "/mcp",
            content=json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {
                        "name": "files_update",
                        "arguments": {"file_id": "f", "content": "x"},
                        "_meta": envelope(),
                    },
                }
            ),
            headers={
                "authorization": "Bearer reader",
                "accept": "application/json, text/event-stream",
                "content-type": "application/json",
                "mcp-protocol-version": "2026-07-28",
                "mcp-method": "tools/call",
                "mcp-name": "files_update",
            },
        )
    assert response.status_code == 403
    header = response.headers["www-authenticate"]
    assert header.startswith('Bearer error="insufficient_scope", scope="read write", resource_metadata="')
    assert response.headers["cache-control"] == "no-store"
    # The SDK's OAuth client reads the same values (it steps up to exactly these scopes).
    assert extract_scope_from_www_auth(sdk_view(403, header)) == "read write"
    assert extract_resource_metadata_from_www_auth(sdk_view(403, header)) == RESOURCE_METADATA
    reading = read_challenge(403, header)
    assert reading.denial is not None
    assert reading.denial.scopes == ("read", "write")
    assert reading.denial.reason == "insufficient_authorization"
    assert reading.denial.remediation_posture == "available"
    assert ran.names == []


async def test_sufficient_scopes_reach_the_tool_and_unscoped_tools_pass():
    server, app, ran = build_resource_server()
    async with http_wire(server, app, token_="writer") as wire:
        updated = await wire.call_tool("files_update", {"file_id": "f", "content": "x"})
        got = await wire.as_principal("reader").call_tool("files_get", {"file_id": "f"})
        listed = await wire.as_principal("reader").request("tools/list")
    assert updated.status == 200
    assert updated.result["content"][0]["text"] == "updated f"
    assert got.result["content"][0]["text"] == "contents of f"
    assert {tool["name"] for tool in listed.result["tools"]} >= {"files_update", "files_get"}
    assert ran.names == ["files_update", "files_get"]


@pytest.mark.sep_check("sep-2643-server-rar-challenge")
async def test_rar_step_up_is_a_401_with_base64url_remediation_built_from_the_request():
    server, app, ran = build_resource_server()
    async with http_wire(server, app, token_="payer") as wire:
        reply = await wire.call_tool("payments_initiate", PAY_123)
        response_header = None
        raw = await post(
            wire,
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 9,
                    "method": "tools/call",
                    "params": {"name": "payments_initiate", "arguments": PAY_123, "_meta": envelope()},
                }
            ).encode(),
            **{"mcp-method": "tools/call", "mcp-name": "payments_initiate"},
        )
        response_header = raw.headers["www-authenticate"]
    assert reply.status == 401
    assert raw.status_code == 401
    assert raw.headers["cache-control"] == "no-store"
    assert response_header.startswith('Bearer error="insufficient_authorization", resource_metadata="')
    assert 'error_description="Additional authorization is required"' in response_header
    parameter = response_header.rsplit("authorization_remediation=", 1)[1].strip('"')
    assert "=" not in parameter
    assert "+" not in parameter
    assert "/" not in parameter
    document = json.loads(base64.urlsafe_b64decode(parameter + "=" * (-len(parameter) % 4)))
    assert document == {"authorization_details": payment_details(PAY_123)}  # single use: no reference
    assert decode_remediation(parameter).authorization_details == payment_details(PAY_123)
    reading = read_challenge(401, response_header)
    assert reading.denial is not None
    assert reading.denial.remediation is not None
    assert reading.denial.remediation.authorization_details == payment_details(PAY_123)
    assert ran.names == []


@pytest.mark.sep_check("sep-2643-server-validates-token-against-request")
async def test_details_for_another_payment_do_not_authorize_this_one():
    server, app, ran = build_resource_server()
    async with http_wire(server, app, token_="payer-123") as wire:
        other = await wire.call_tool("payments_initiate", {**PAY_123, "amount": "999.00"})
        other_payee = await wire.call_tool("payments_initiate", {**PAY_123, "creditorName": "Merchant B"})
        same = await wire.call_tool("payments_initiate", PAY_123)
    assert other.status == 401
    assert other_payee.status == 401
    assert same.status == 200
    assert same.result["content"][0]["text"] == "paid 123.50 EUR to Merchant A"
    assert ran.names == ["payments_initiate"]


@pytest.mark.sep_check("sep-2643-server-context-id-not-authorization", "sep-2643-server-fresh-evaluation")
async def test_an_echoed_context_id_grants_nothing_and_a_bad_one_blocks_nothing():
    server, app, ran = build_resource_server()
    async with http_wire(server, app) as wire:
        for context_id in ("authzctx_7c5d1d79", "x" * 5000, 42, None):
            meta = envelope(extra={CONTEXT_KEY: context_id})
            denied = await wire.as_principal("reader").call_tool(
                "files_update", {"file_id": "f", "content": "x"}, meta=meta
            )
            allowed = await wire.as_principal("writer").call_tool(
                "files_update", {"file_id": "f", "content": "x"}, meta=meta
            )
            assert denied.status == 403, context_id
            assert allowed.status == 200, context_id
    assert ran.names == ["files_update"] * 4


async def test_mcp_name_header_naming_a_scoped_tool_is_checked_even_if_the_body_differs():
    server, app, ran = build_resource_server()
    async with http_wire(server, app, token_="reader") as wire:
        params = {"name": "files_get", "arguments": {"file_id": "f"}}
        plain = await wire.request("tools/call", params, name="files_update")
        sentinel = "=?base64?" + base64.b64encode(b"files_update").decode() + "?="
        wrapped = await wire.request("tools/call", params, name=sentinel)
        matching = await wire.request("tools/call", params, name="files_get")
    assert plain.status == 403
    assert wrapped.status == 403
    assert matching.status == 200
    assert ran.names == ["files_get"]


async def test_without_a_token_the_challenge_has_no_error_code_and_a_bad_token_is_invalid_token():
    server, app, ran = build_resource_server()
    async with http_wire(server, app) as wire:
        call = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "files_update"}})
        anonymous = await post(wire, call.encode(), authorization=None)
        empty = await post(wire, call.encode(), authorization="")
        wrong = await post(wire.as_principal("nobody"), call.encode())
    assert anonymous.status_code == 401
    assert (
        anonymous.headers["www-authenticate"] == f'Bearer scope="read write", resource_metadata="{RESOURCE_METADATA}"'
    )
    assert empty.status_code == 401
    assert empty.headers["www-authenticate"] == anonymous.headers["www-authenticate"]
    assert wrong.status_code == 401
    assert wrong.headers["www-authenticate"].startswith('Bearer error="invalid_token", scope="read write"')
    assert ran.names == []


async def test_batches_are_checked_element_by_element():
    server, app, ran = build_resource_server()
    batch = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "files_get", "arguments": {"file_id": "f"}},
        },
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "files_update", "arguments": {}}},
    ]
    async with http_wire(server, app, token_="reader") as wire:
        response = await post(wire, json.dumps(batch).encode())
    assert response.status_code == 403
    assert ran.names == []


async def test_oversized_bodies_are_refused_and_unparseable_ones_reach_the_sdk():
    server, app, ran = build_resource_server()
    async with http_wire(server, app, token_="reader") as wire:
        huge = await post(wire, b'{"jsonrpc": "2.0", "pad": "' + b"x" * (4 * 1024 * 1024) + b'"}')
        broken = await post(wire, b'{"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "files_update"')
    assert huge.status_code == 413
    assert broken.status_code == 400
    assert broken.json()["error"]["code"] == -32700
    assert ran.names == []


async def test_other_paths_and_methods_are_untouched():
    server, app, _ = build_resource_server()
    async with http_wire(server, app, token_="reader") as wire:
        metadata = await wire.http.get("/.well-known/oauth-protected-resource/mcp")
        get = await wire.http.get("/mcp", headers={"authorization": "Bearer reader", "accept": "text/event-stream"})
    assert metadata.status_code == 200
    assert metadata.json()["resource"] == "http://127.0.0.1:8000/mcp"
    assert get.status_code not in (401, 403)
