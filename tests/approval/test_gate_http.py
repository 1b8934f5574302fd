"""The policy gate over streamable HTTP (in process): a real Cedar PDP, tools that count their runs."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from mcp_approval.approval import GatedCall
from mcp_approval.checks.wire import CLIENT_INFO, envelope
from mcp_approval.client.denials import AuthorizationDenial, read_denial
from mcp_approval.denials import Remediation
from mcp_approval.policy import Decision, HttpPDP
from mcp_approval.protocol import META_AUTHORIZATION, META_AUTHORIZATION_CONTEXT_ID
from tests.approval.support import FixedPDP, build_gated_server, cedar_pdp, http_wire

pytestmark = pytest.mark.anyio

BARE = envelope(tasks=False, elicitation=False)


def denial(result: dict[str, Any]) -> AuthorizationDenial:
    """The envelope of ``result``, read the way a client reads it."""
    reading = read_denial(result)
    assert reading.problem is None, reading.problem
    assert reading.denial is not None, f"no envelope in {result}"
    return reading.denial


def text(result: dict[str, Any]) -> str:
    return " ".join(item["text"] for item in result["content"] if item.get("type") == "text")


async def test_an_allowed_call_runs_the_tool_once_and_carries_no_envelope():
    ran: Counter[str] = Counter()
    async with http_wire(build_gated_server(cedar_pdp(), ran, tokens=True), token="alice-token") as wire:
        reply = await wire.call_tool("echo", {"text": "hi"}, meta=BARE)
        staging = await wire.call_tool("deploy", {"env": "staging"}, meta=BARE)
    assert reply.result["isError"] is False
    assert text(reply.result) == "hi"
    assert META_AUTHORIZATION not in reply.result.get("_meta", {})
    assert not read_denial(reply.result).envelope_present
    assert text(staging.result) == "deployed to staging"
    assert ran == Counter({"echo": 1, "deploy": 1})


async def test_a_final_deny_is_unavailable_and_never_runs_the_tool():
    ran: Counter[str] = Counter()
    async with http_wire(build_gated_server(cedar_pdp(), ran, tokens=True), token="alice-token") as wire:
        reply = await wire.call_tool("drop_table", {"table": "users"}, meta=BARE)
    assert reply.result["isError"] is True
    assert "not authorized to call drop_table" in text(reply.result)
    found = denial(reply.result)
    assert found.remediation is Remediation.UNAVAILABLE
    assert found.hints == ()
    assert found.context_id is not None
    assert ran == Counter()


@pytest.mark.parametrize("meta", [BARE, envelope(tasks=True, elicitation=True)], ids=["bare", "declares-both"])
async def test_a_requestable_deny_is_undisclosed_with_guidance_and_never_runs_the_tool(meta: dict[str, Any]):
    ran: Counter[str] = Counter()
    async with http_wire(build_gated_server(cedar_pdp(), ran, tokens=True), token="alice-token") as wire:
        reply = await wire.call_tool("deploy", {"env": "prod"}, meta=meta)
    message = text(reply.result)
    assert reply.result["isError"] is True
    assert denial(reply.result).remediation is Remediation.UNDISCLOSED  # a remedy exists: never unavailable
    assert "requires approval" in message
    assert "Production deploy." in message
    assert "A release manager approves production deploys." in message
    assert "call the tool again" in message
    assert "deploy_approval" not in message  # the template, like every backend artifact, stays server-side
    assert "evaluation" not in str(reply.result)
    assert ran == Counter()


async def test_the_subject_is_the_authenticated_principal_and_the_call_is_mapped():
    pdp = FixedPDP()
    ran: Counter[str] = Counter()
    async with http_wire(build_gated_server(pdp, ran, tokens=True), token="alice-token") as wire:
        await wire.call_tool("echo", {"text": "a"}, meta=BARE)
        await wire.as_principal("bob-token").call_tool("echo", {"text": "b"}, meta=BARE)
    alice, bob = pdp.requests
    assert (alice.subject.type, alice.subject.id, bob.subject.id) == ("user", "alice", "bob")
    assert alice.action.name == "tools/call"
    assert (alice.resource.type, alice.resource.id) == ("tool", "echo")
    assert alice.context == {"arguments": {"text": "a"}, "client": CLIENT_INFO}


async def test_an_anonymous_caller_is_denied_unless_an_anonymous_subject_is_configured():
    ran: Counter[str] = Counter()
    async with http_wire(build_gated_server(FixedPDP(), ran)) as wire:
        refused = await wire.call_tool("echo", {"text": "x"}, meta=BARE)
    pdp = FixedPDP()
    async with http_wire(build_gated_server(pdp, ran, anonymous_principal="guest")) as wire:
        allowed = await wire.call_tool("echo", {"text": "x"}, meta=BARE)
    assert denial(refused.result).remediation is Remediation.UNDISCLOSED
    assert "authenticated caller" in text(refused.result)
    assert text(allowed.result) == "x"
    assert pdp.requests[0].subject.id == "guest"
    assert ran == Counter({"echo": 1})


async def test_a_failing_pdp_fails_closed():
    ran: Counter[str] = Counter()
    async with http_wire(
        build_gated_server(FixedPDP(error=RuntimeError("boom")), ran, tokens=True), token="alice-token"
    ) as wire:
        reply = await wire.call_tool("echo", {"text": "hi"}, meta=BARE)
    assert reply.result["isError"] is True
    assert "could not be decided" in text(reply.result)
    assert denial(reply.result).remediation is Remediation.UNAVAILABLE
    assert ran == Counter()


async def test_an_unreachable_remote_pdp_fails_closed():
    ran: Counter[str] = Counter()
    pdp = HttpPDP("http://127.0.0.1:9", discovery=False, timeout_s=2.0)
    async with http_wire(build_gated_server(pdp, ran, tokens=True), token="alice-token") as wire:
        reply = await wire.call_tool("echo", {"text": "hi"}, meta=BARE)
    assert denial(reply.result).remediation is Remediation.UNAVAILABLE
    assert ran == Counter()


async def test_an_echoed_context_id_is_logged_and_every_retry_is_evaluated_afresh(caplog: pytest.LogCaptureFixture):
    caplog.set_level("INFO", logger="mcp_approval.denials")
    pdp = FixedPDP(Decision.deny())
    ran: Counter[str] = Counter()
    async with http_wire(build_gated_server(pdp, ran, tokens=True), token="alice-token") as wire:
        first = await wire.call_tool("echo", {"text": "hi"}, meta=BARE)
        context_id = denial(first.result).context_id
        assert context_id is not None
        retry = await wire.call_tool("echo", {"text": "hi"}, meta={**BARE, **denial(first.result).retry_meta()})
        pdp.decision = Decision.permit()
        odd = {**BARE, META_AUTHORIZATION_CONTEXT_ID: {"not": "a string"}}
        allowed = await wire.call_tool("echo", {"text": "hi"}, meta=odd)
    assert len(pdp.requests) == 3
    assert denial(retry.result).context_id not in (None, context_id)
    assert f"echoes authorization context {context_id}" in caplog.text
    assert text(allowed.result) == "hi"  # an unusable echo is ignored, never a reason to reject
    assert ran == Counter({"echo": 1})


async def test_authorization_details_in_the_decision_become_a_credential_remediation():
    details = [{"type": "payment_initiation", "instructedAmount": {"currency": "EUR", "amount": "5.00"}}]
    ran: Counter[str] = Counter()
    pdp = FixedPDP(Decision.deny("insufficient_authorization", authorization_details=details))
    async with http_wire(build_gated_server(pdp, ran, tokens=True), token="alice-token") as wire:
        reply = await wire.call_tool("echo", {"text": "hi"}, meta=BARE)
    found = denial(reply.result)
    assert found.remediation is Remediation.AVAILABLE
    assert found.authorization_remediation is not None
    assert found.authorization_remediation.authorization_details == details
    assert found.authorization_remediation.authorization_reference is None  # single use by default
    assert ran == Counter()


async def test_missing_scopes_in_the_decision_are_named_in_an_undisclosed_denial():
    ran: Counter[str] = Counter()
    pdp = FixedPDP(Decision.deny("insufficient_scope", missing_scopes=["deploy:write"]))
    async with http_wire(build_gated_server(pdp, ran, tokens=True), token="alice-token") as wire:
        reply = await wire.call_tool("echo", {"text": "hi"}, meta=BARE)
    assert denial(reply.result).remediation is Remediation.UNDISCLOSED
    assert "deploy:write" in text(reply.result)
    assert ran == Counter()


async def test_the_requestable_seam_receives_the_call_and_decides_the_answer():
    seen: list[tuple[GatedCall, Decision]] = []

    async def approve_at_once(call: GatedCall, decision: Decision, ctx: Any) -> Any:
        seen.append((call, decision))
        return await call.proceed(ctx)

    ran: Counter[str] = Counter()
    server = build_gated_server(cedar_pdp(), ran, tokens=True, on_requestable=approve_at_once)
    async with http_wire(server, token="alice-token") as wire:
        reply = await wire.call_tool("deploy", {"env": "prod"}, meta=BARE)
    ((call, decision),) = seen
    assert (call.tool, call.principal, dict(call.arguments)) == ("deploy", "alice", {"env": "prod"})
    assert call.request.resource.id == "deploy"
    assert decision.requestable_denial is not None
    assert text(reply.result) == "deployed to prod"
    assert ran == Counter({"deploy": 1})
