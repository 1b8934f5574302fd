"""The ``url`` remediation (MRTR rounds the caller drives) and the HTTP scope challenge the SDK client handles."""

from __future__ import annotations

import itertools
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError

from mcp_approval.client.authorization import AuthorizationDenied, AuthorizingCaller
from mcp_approval.client.challenges import read_challenge
from mcp_approval.client.tasks import TasksClient
from mcp_approval.denials import Remediation, url_interaction
from mcp_approval.denials.context import echoed_context_id
from mcp_approval.protocol import META_AUTHORIZATION, META_AUTHORIZATION_CONTEXT_ID
from mcp_approval.tasks import TaskOptions
from mcp_approval.testing.tasks_demo import build_tasks_demo_server
from tests.client.support import serving
from tests.denials.support import BASE_URL, RESOURCE_METADATA, ServerState, build_denials_server, build_resource_server
from tests.support.timing import scaled

pytestmark = pytest.mark.anyio

FOLDER_URL = "https://mcp.example.com/approve-folder-access?folder=f1"


def approving(seen: list[str]) -> Any:
    """An elicitation callback that accepts, noting each URL it is asked to open."""

    async def approve(context: Any, params: Any) -> types.ElicitResult:
        seen.append(getattr(params, "url", ""))
        return types.ElicitResult(action="accept")

    return approve


def context_id_of(reply: dict[str, Any] | None) -> str:
    assert reply is not None
    context_id = reply["_meta"][META_AUTHORIZATION]["authorizationContextId"]
    assert isinstance(context_id, str)
    return context_id


async def test_a_url_hint_is_answered_through_the_elicitation_callback_and_the_retry_echoes_the_context_id():
    """The caller drives the round itself: answers, the exact requestState, the caller's meta and the echo."""
    seen: list[str] = []
    state = ServerState()
    async with serving(build_denials_server(state), elicitation_callback=approving(seen)) as (client, _, recorder):
        caller = AuthorizingCaller(client, origin_assured=True)
        result = await caller.call_tool("open_folder", {"folder": "f1"}, meta={"trace": "t-1"})
    assert result.content[0].text == "opened f1"  # type: ignore[union-attr]
    assert seen == [FOLDER_URL]
    assert state.ran == ["open_folder:f1"]
    first, retry = recorder.of("open_folder")
    assert first.reply is not None
    assert first.reply["resultType"] == "input_required"
    context_id = context_id_of(first.reply)
    assert first.meta["trace"] == retry.meta["trace"] == "t-1"  # the caller's meta, on every attempt
    assert META_AUTHORIZATION_CONTEXT_ID not in first.meta
    assert retry.meta[META_AUTHORIZATION_CONTEXT_ID] == context_id
    assert retry.params.get("requestState") == first.reply.get("requestState")  # passed back unchanged (none here)
    assert retry.params["inputResponses"] == {"authorization": {"action": "accept"}}
    assert state.echoed == [None, context_id]  # the server read the echo


def two_approvals_server(seen: list[tuple[str | None, str | None]]) -> MCPServer[Any]:
    """A tool that wants two url approvals in turn, each denial with its own state and context id."""
    server: MCPServer[Any] = MCPServer("two-approvals", log_level="WARNING")

    @server.tool()
    async def transfer(ctx: Context) -> types.CallToolResult | types.InputRequiredResult:
        state = ctx.request_state
        seen.append((state, echoed_context_id(ctx.request_context.meta)))
        if state == "after-approval-2":
            return types.CallToolResult(content=[types.TextContent(type="text", text="transferred")])
        step = 2 if state == "after-approval-1" else 1
        return url_interaction(
            url=f"https://mcp.example.com/approve/{step}",
            message=f"Approval {step} of 2.",
            request_state=f"after-approval-{step}",
            context_id=f"authzctx_{step}",
        )

    return server


async def test_each_round_passes_the_request_state_back_and_echoes_the_latest_context_id():
    calls: list[tuple[str | None, str | None]] = []
    urls: list[str] = []
    async with serving(two_approvals_server(calls), elicitation_callback=approving(urls)) as (client, _, _recorder):
        result = await AuthorizingCaller(client, origin_assured=True).call_tool("transfer", {})
    assert result.content[0].text == "transferred"  # type: ignore[union-attr]
    assert urls == ["https://mcp.example.com/approve/1", "https://mcp.example.com/approve/2"]
    assert calls == [(None, None), ("after-approval-1", "authzctx_1"), ("after-approval-2", "authzctx_2")]


async def test_a_declined_url_interaction_is_raised_without_resending_the_call():
    asked: list[str] = []

    async def refuse(context: Any, params: Any) -> types.ErrorData:
        asked.append(getattr(params, "url", ""))
        return types.ErrorData(code=types.INVALID_REQUEST, message="the user refused")

    state = ServerState()
    async with serving(build_denials_server(state), elicitation_callback=refuse) as (client, _, recorder):
        with pytest.raises(AuthorizationDenied) as denied:
            await AuthorizingCaller(client, origin_assured=True).call_tool("open_folder", {"folder": "f1"})
    assert asked == [FOLDER_URL]
    assert denied.value.denial.remediation is Remediation.AVAILABLE
    assert isinstance(denied.value.result, types.InputRequiredResult)
    assert "declined input request 'authorization': the user refused" in denied.value.why
    assert denied.value.attempts == 1
    assert len(recorder.of("open_folder")) == 1
    assert state.ran == []


async def test_a_url_interaction_answered_decline_is_resent_each_round_echoing_the_latest_id_until_the_bound():
    """A decline is an answer the server may act on; this server asks again, so the rounds run out."""

    async def decline(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    state = ServerState()
    async with serving(build_denials_server(state), elicitation_callback=decline) as (client, _, recorder):
        caller = AuthorizingCaller(client, origin_assured=True, max_input_rounds=2)
        with pytest.raises(AuthorizationDenied) as denied:
            await caller.call_tool("open_folder", {"folder": "f1"})
    assert "after 2 input rounds" in denied.value.why
    assert denied.value.attempts == 3
    calls = recorder.of("open_folder")
    assert len(calls) == 3
    for previous, retry in itertools.pairwise(calls):
        assert retry.meta[META_AUTHORIZATION_CONTEXT_ID] == context_id_of(previous.reply)  # the latest denial's
    assert state.ran == []


async def test_without_origin_assurance_the_url_of_a_denial_is_not_opened():
    seen: list[str] = []
    state = ServerState()
    async with serving(build_denials_server(state), elicitation_callback=approving(seen)) as (client, _, recorder):
        with pytest.raises(AuthorizationDenied) as denied:
            await AuthorizingCaller(client).call_tool("open_folder", {"folder": "f1"})
    assert denied.value.why == "the origin is not assured"
    assert seen == []
    assert len(recorder.of("open_folder")) == 1
    assert state.ran == []


async def test_without_url_elicitation_the_same_denial_is_undisclosed_and_raised():
    state = ServerState()
    async with Client(build_denials_server(state)) as client:
        with pytest.raises(AuthorizationDenied) as denied:
            await AuthorizingCaller(client, origin_assured=True).call_tool("open_folder", {"folder": "f1"})
    assert denied.value.denial.remediation is Remediation.UNDISCLOSED
    assert state.ran == []
    assert len(state.echoed) == 1


async def test_an_insufficient_scope_403_stays_below_the_caller_and_read_challenge_classifies_it():
    """The 403 is the transport's: an ``OAuthClientProvider`` as the ``httpx2`` ``auth`` would step up here.

    Without one the SDK reports the failure; the challenge the response carried is classified
    ``insufficient_authorization`` / ``available`` with the scopes to request.
    """
    server, app, ran = build_resource_server()
    challenges: list[tuple[int, str | None]] = []

    async def keep_challenge(response: httpx2.Response) -> None:
        if response.status_code in (401, 403):
            challenges.append((response.status_code, response.headers.get("www-authenticate")))

    transport = httpx2.ASGITransport(app=app)
    async with (
        server.session_manager.run(),
        httpx2.AsyncClient(
            transport=transport,
            base_url=BASE_URL,
            headers={"Authorization": "Bearer reader"},
            event_hooks={"response": [keep_challenge]},
        ) as http,
        Client(streamable_http_client(f"{BASE_URL}/mcp", http_client=http)) as client,
    ):
        with pytest.raises(MCPError):  # no OAuthClientProvider here to step up
            await AuthorizingCaller(client).call_tool("files_update", {"file_id": "f", "content": "x"})
    ((status, header),) = challenges
    reading = read_challenge(status, header)
    assert status == 403
    assert reading.denial is not None, reading.problem
    assert reading.denial.error == "insufficient_scope"
    assert reading.denial.scopes == ("read", "write")
    assert reading.denial.resource_metadata == RESOURCE_METADATA
    assert reading.denial.remediation_posture is Remediation.AVAILABLE
    assert ran.names == []


async def test_a_task_result_is_finished_by_the_clients_tasks_extension():
    """``resultType: task`` reaches the caller claimed; the ``TasksClient`` claim resolves it."""
    server, _ = build_tasks_demo_server(
        TaskOptions(modes={"required_job": "required"}, threshold_s=0.05, poll_interval_s=0.02)
    )
    async with Client(server, extensions=[TasksClient(task_wait_s=scaled(10))]) as client:
        result = await AuthorizingCaller(client).call_tool("required_job", {"label": "via caller"})
    assert result.content[0].text == "via caller done"  # type: ignore[union-attr]
