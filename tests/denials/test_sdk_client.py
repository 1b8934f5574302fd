"""Denials through the SDK's own client: in memory and over a real stdio subprocess (no HTTP challenge layer)."""

from __future__ import annotations

import sys
from pathlib import Path

import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from mcp_approval.client.denials import ResultKind, denial_of
from mcp_approval.denials import Remediation
from tests.denials.support import PAY_123, ServerState, build_denials_server, payment_details

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


def accepting(seen: list[str]):
    async def elicit(_context, params):
        seen.append(getattr(params, "url", ""))
        return types.ElicitResult(action="accept")

    return elicit


async def test_url_denial_then_the_sdk_retries_with_the_answer_and_the_call_succeeds():
    state = ServerState()
    seen: list[str] = []
    async with Client(build_denials_server(state), elicitation_callback=accepting(seen)) as client:
        raw = await client.session.call_tool("open_folder", {"folder": "f1"}, allow_input_required=True)
        denial = denial_of(raw)
        result = await client.call_tool("open_folder", {"folder": "f1"})
    assert isinstance(raw, types.InputRequiredResult)
    assert denial is not None
    assert denial.result_kind is ResultKind.INPUT_REQUIRED
    assert denial.url_requests == {"authorization": "https://mcp.example.com/approve-folder-access?folder=f1"}
    assert seen == ["https://mcp.example.com/approve-folder-access?folder=f1"]
    assert result.content[0].text == "opened f1"
    assert state.ran == ["open_folder:f1"]


async def test_without_url_elicitation_the_sdk_client_reads_undisclosed():
    async with Client(build_denials_server(ServerState())) as client:
        result = await client.call_tool("open_folder", {"folder": "f1"})
    denial = denial_of(result)
    assert result.is_error
    assert denial is not None
    assert denial.remediation is Remediation.UNDISCLOSED
    assert denial.retry_unchanged_forbidden


@pytest.mark.sep_check("sep-2643-server-credential-remediation", "sep-2643-client-echo-verbatim-under-key")
async def test_over_stdio_the_envelope_alone_carries_the_remediation_and_the_echo_round_trips():
    parameters = StdioServerParameters(command=sys.executable, args=["-m", "tests.denials.stdio_server"], cwd=str(ROOT))
    async with Client(parameters) as client:
        denied = await client.call_tool("payments_initiate", PAY_123)
        denial = denial_of(denied)
        assert denial is not None
        retried = await client.call_tool("payments_initiate", PAY_123, meta=denial.retry_meta())  # type: ignore[arg-type]
        final = await client.call_tool("workspace", {})
        echoes = await client.call_tool("echoes", {})
    assert denied.is_error
    assert denial.remediation is Remediation.AVAILABLE
    assert denial.authorization_remediation is not None
    assert denial.authorization_remediation.authorization_details == payment_details(PAY_123)
    assert denial.context_id is not None
    assert len(denial.context_id) == 43
    assert retried.is_error  # the server's credential is unchanged: evaluated afresh, still denied
    assert denial_of(retried).context_id != denial.context_id
    assert denial_of(final).remediation is Remediation.UNAVAILABLE
    assert echoes.structured_content == {"result": [None, denial.context_id]}


@pytest.mark.sep_check("sep-2643-server-url-hint")
async def test_over_stdio_a_url_denial_is_answered_through_the_elicitation_callback():
    seen: list[str] = []
    parameters = StdioServerParameters(command=sys.executable, args=["-m", "tests.denials.stdio_server"], cwd=str(ROOT))
    async with Client(parameters, elicitation_callback=accepting(seen)) as client:
        raw = await client.session.call_tool("open_folder", {"folder": "f2"}, allow_input_required=True)
        result = await client.call_tool("open_folder", {"folder": "f2"})
    denial = denial_of(raw)
    assert denial is not None
    assert denial.url_requests == {"authorization": "https://mcp.example.com/approve-folder-access?folder=f2"}
    assert seen == ["https://mcp.example.com/approve-folder-access?folder=f2"]
    assert result.content[0].text == "opened f2"  # type: ignore[union-attr]
