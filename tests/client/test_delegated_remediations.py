"""Remediations the wrapped SDK client already carries out: ``url`` (MRTR) and the HTTP scope challenge."""

from __future__ import annotations

from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from mcp_approval.client.authorization import AuthorizationDenied, AuthorizingCaller
from mcp_approval.client.challenges import read_challenge
from mcp_approval.denials import Remediation
from tests.denials.support import BASE_URL, RESOURCE_METADATA, ServerState, build_denials_server, build_resource_server

pytestmark = pytest.mark.anyio

FOLDER_URL = "https://mcp.example.com/approve-folder-access?folder=f1"


async def test_a_url_hint_is_answered_by_the_sdks_elicitation_driver_beneath_the_caller():
    """The SDK's MRTR driver opens the url-mode elicitation and resends; the caller sees the success."""
    seen: list[str] = []

    async def approve(context: Any, params: Any) -> types.ElicitResult:
        seen.append(getattr(params, "url", ""))
        return types.ElicitResult(action="accept")

    state = ServerState()
    async with Client(build_denials_server(state), elicitation_callback=approve) as client:
        result = await AuthorizingCaller(client, origin_assured=True).call_tool("open_folder", {"folder": "f1"})
    assert result.content[0].text == "opened f1"  # type: ignore[union-attr]
    assert seen == [FOLDER_URL]
    assert state.ran == ["open_folder:f1"]
    # The SDK's driver resends the call's own _meta: the handle is not echoed on this retry (a server
    # must process such a retry normally, and this one does).
    assert state.echoed == [None, None]


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
