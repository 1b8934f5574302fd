"""The envelope on the wire: each placement as an MCPServer tool answers it, over streamable HTTP."""

from __future__ import annotations

import logging

import pytest
from mcp.server.mcpserver import MCPServer

from mcp_approval.checks.wire import envelope
from mcp_approval.client.denials import read_denial
from mcp_approval.denials import context_correlation_middleware
from tests.denials.support import PAY_123, ServerState, build_denials_server, http_wire, payment_details

pytestmark = pytest.mark.anyio

AUTHORIZATION = "io.modelcontextprotocol/authorization"
CONTEXT_KEY = "io.modelcontextprotocol/authorization-context-id"


def meta_without_url_or_tasks() -> dict:
    return envelope(tasks=False, elicitation=False)


@pytest.mark.sep_check("sep-2643-server-envelope-in-meta", "sep-2643-server-url-hint")
async def test_url_interaction_is_an_input_required_result_with_a_url_hint():
    state = ServerState()
    async with http_wire(build_denials_server(state)) as wire:
        reply = await wire.call_tool("open_folder", {"folder": "fld_12345"})
    result = reply.result
    assert result["resultType"] == "input_required"
    assert result["inputRequests"]["authorization"] == {
        "method": "elicitation/create",
        "params": {
            "mode": "url",
            "url": "https://mcp.example.com/approve-folder-access?folder=fld_12345",
            "message": "Open this page to approve access to the requested folder.",
        },
    }
    denial = result["_meta"][AUTHORIZATION]
    assert set(denial) == {"reason", "remediation", "authorizationContextId", "remediationHints"}
    assert denial["reason"] == "insufficient_authorization"
    assert denial["remediation"] == "available"
    assert denial["remediationHints"] == [{"type": "url"}]
    assert read_denial(result).denial.url_requests == {
        "authorization": "https://mcp.example.com/approve-folder-access?folder=fld_12345"
    }
    assert state.ran == []


@pytest.mark.sep_check("sep-2643-server-undisclosed-not-unavailable", "sep-2643-server-url-needs-declared-elicitation")
@pytest.mark.parametrize(
    "capabilities",
    [
        pytest.param({}, id="nothing"),
        pytest.param({"elicitation": {"form": {}}}, id="form-only"),
        pytest.param({"elicitation": {}}, id="empty-elicitation"),
        pytest.param({"extensions": {"io.modelcontextprotocol/tasks": {}}}, id="tasks-but-no-task-remedy"),
    ],
)
async def test_a_request_that_cannot_be_offered_the_url_gets_undisclosed_never_unavailable(capabilities):
    state = ServerState()
    meta = meta_without_url_or_tasks()
    meta["io.modelcontextprotocol/clientCapabilities"] = capabilities
    async with http_wire(build_denials_server(state)) as wire:
        reply = await wire.call_tool("open_folder", {"folder": "fld_12345"}, meta=meta)
    result = reply.result
    assert result["resultType"] == "complete"
    assert result["isError"] is True
    assert "inputRequests" not in result
    denial = result["_meta"][AUTHORIZATION]
    assert denial["remediation"] == "undisclosed"
    assert "remediationHints" not in denial
    assert "approval" in result["content"][0]["text"]  # the remedy is described in content
    assert state.ran == []


@pytest.mark.sep_check("sep-2643-server-accepts-absent-or-unknown-context-id", "sep-2643-server-fresh-evaluation")
@pytest.mark.parametrize(
    "echo",
    [
        pytest.param({}, id="absent"),
        pytest.param({CONTEXT_KEY: "authzctx_unknown"}, id="unknown"),
        pytest.param({CONTEXT_KEY: "x" * 100_000}, id="oversized"),
        pytest.param({CONTEXT_KEY: {"nested": ["object"]}}, id="not-a-string"),
        pytest.param({CONTEXT_KEY: "line\nbreak"}, id="control-characters"),
    ],
)
async def test_retries_are_evaluated_afresh_whatever_they_echo(echo, caplog):
    state = ServerState()
    caplog.set_level(logging.INFO, logger="mcp_approval.denials")
    async with http_wire(build_denials_server(state)) as wire:
        denied = await wire.call_tool("open_folder", {"folder": "a"}, meta=envelope(extra=echo))
        assert denied.result["resultType"] == "input_required"  # no approval yet: still denied
        state.approved.add("a")  # the approval page recorded it
        allowed = await wire.call_tool("open_folder", {"folder": "a"}, meta=envelope(extra=echo))
    assert allowed.status == 200
    assert allowed.result["content"][0]["text"] == "opened a"
    assert state.ran == ["open_folder:a"]
    assert state.echoed == [None, None] if echo.get(CONTEXT_KEY) != "authzctx_unknown" else ["authzctx_unknown"] * 2
    assert "x" * 300 not in caplog.text  # an oversized echo is never logged


async def test_the_echoed_id_of_a_real_denial_is_read_and_logged(caplog):
    state = ServerState()
    caplog.set_level(logging.INFO, logger="mcp_approval.denials")
    async with http_wire(build_denials_server(state)) as wire:
        first = await wire.call_tool("open_folder", {"folder": "b"})
        context_id = first.result["_meta"][AUTHORIZATION]["authorizationContextId"]
        await wire.call_tool("open_folder", {"folder": "b"}, meta=envelope(extra={CONTEXT_KEY: context_id}))
    assert state.echoed == [None, context_id]
    assert f"retry of 'open_folder' echoes authorization context {context_id}" in caplog.text


@pytest.mark.sep_check("sep-2643-envelope-reason-required", "sep-2643-envelope-remediation-required")
async def test_final_denial_matches_the_seps_example():
    async with http_wire(build_denials_server(ServerState())) as wire:
        reply = await wire.call_tool("workspace", {})
    result = reply.result
    assert result["isError"] is True
    assert result["content"] == [{"type": "text", "text": "You do not have access to this workspace."}]
    assert result["_meta"][AUTHORIZATION] == {
        "reason": "insufficient_authorization",
        "remediation": "unavailable",
        "authorizationContextId": "authzctx_2b7e9c",
    }


@pytest.mark.sep_check("sep-2643-server-credential-remediation", "sep-2643-server-no-reference-single-use")
async def test_credential_remediation_without_http_carries_the_details_and_no_reference():
    state = ServerState()
    async with http_wire(build_denials_server(state)) as wire:
        denied = await wire.call_tool("payments_initiate", PAY_123)
        state.held_details = payment_details(PAY_123)  # the client obtained the credential
        paid = await wire.call_tool("payments_initiate", PAY_123)
    result = denied.result
    assert result["isError"] is True
    denial = result["_meta"][AUTHORIZATION]
    assert denial["remediation"] == "available"
    assert denial["remediationHints"] == [
        {"type": "authorization_remediation", "authorization_details": payment_details(PAY_123)}
    ]
    assert paid.result["content"][0]["text"] == "paid"
    assert state.ran == ["payments_initiate"]


async def test_scope_shortfall_without_a_challenge_is_undisclosed_and_names_the_scopes():
    async with http_wire(build_denials_server(ServerState())) as wire:
        reply = await wire.call_tool("files_update", {"file_id": "f"})
    result = reply.result
    assert result["_meta"][AUTHORIZATION]["remediation"] == "undisclosed"
    assert "remediationHints" not in result["_meta"][AUTHORIZATION]
    assert result["content"][0]["text"] == "files_update needs a credential that also grants: write."


@pytest.mark.sep_check("sep-2643-server-no-envelope-after-execution", "sep-2643-server-ordinary-failure-after-start")
async def test_a_failure_after_the_operation_began_never_carries_the_envelope():
    state = ServerState()
    async with http_wire(build_denials_server(state)) as wire:
        reply = await wire.call_tool("half_done", {})
    result = reply.result
    assert result["isError"] is True
    assert AUTHORIZATION not in result.get("_meta", {})
    assert result["content"][0]["text"].startswith("The operation failed after it started")
    assert state.ran == ["half_done:started"]


@pytest.mark.sep_check("sep-2643-server-accepts-absent-or-unknown-context-id")
async def test_the_correlation_middleware_logs_every_echo_and_rejects_none(caplog):
    server = MCPServer("correlation", middleware=[context_correlation_middleware], log_level="WARNING")

    @server.tool()
    async def plain() -> str:
        return "done"

    caplog.set_level(logging.INFO, logger="mcp_approval.denials")
    async with http_wire(server) as wire:
        echoed = await wire.call_tool("plain", {}, meta=envelope(extra={CONTEXT_KEY: "authzctx_c17a3f5e"}))
        garbage = await wire.call_tool("plain", {}, meta=envelope(extra={CONTEXT_KEY: ["not", "a", "string"]}))
        absent = await wire.call_tool("plain", {})
    assert [reply.result["content"][0]["text"] for reply in (echoed, garbage, absent)] == ["done"] * 3
    assert "retry of 'plain' echoes authorization context authzctx_c17a3f5e" in caplog.text
    assert "ignored an unusable echoed authorization context id (list, length 3)" in caplog.text
