"""Wrong tokens at ``/mcp`` are limited like reviewer sign-ins, and count against the same limit.

``/mcp`` accepts the static tokens that are also reviewer credentials, so without a limit there a
client could guess reviewer tokens through it. A real ``serve`` process on 127.0.0.1.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from mcp_approval.web.throttle import DEFAULT_MAX_FAILURES
from tests.support.timing import scaled
from tests.support.treasury import TreasuryServer, deployment_dir

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def test_wrong_tokens_at_mcp_are_throttled_and_share_the_reviewer_limit(tmp_path: Path) -> None:
    server = TreasuryServer(deployment_dir(tmp_path)).start()
    try:
        with httpx.Client(base_url=server.base_url, timeout=scaled(20)) as client:

            def call_mcp(token: str) -> httpx.Response:
                headers = {**MCP_HEADERS, "authorization": f"Bearer {token}"}
                return client.post("/mcp", json=INITIALIZE, headers=headers)

            assert call_mcp("alice-token").status_code == 200  # a valid token neither counts nor clears
            statuses = [call_mcp(f"guess-{n}").status_code for n in range(DEFAULT_MAX_FAILURES)]
            assert statuses == [401] * DEFAULT_MAX_FAILURES
            refused = call_mcp("guess-next")
            assert refused.status_code == 429
            assert int(refused.headers["retry-after"]) >= 1
            # Refused before the token is checked: a right one is refused too, here and for reviewers.
            assert call_mcp("alice-token").status_code == 429
            reviewer = client.get("/approvals", headers={"authorization": "Bearer carol-token"})
            assert reviewer.status_code == 429
    finally:
        server.kill()
    assert "Traceback" not in server.log()
