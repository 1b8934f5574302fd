"""One caller cannot stall the server with a large ``tools/call`` (issue 16, finding 3).

Arguments over ``[approval] max_argument_*`` are ``-32602`` naming the limit, before policy,
binding or storage see them; a ``/mcp`` body over ``max_request_bytes`` is HTTP 413. Large
arguments within the limits are mapped, decided and sealed off the event loop, so a small request
sent meanwhile is answered long before the large call is done. Real ``serve`` processes on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_approval.approval.options import ApprovalOptions
from mcp_approval.backends.local.records import LISTED_ARGUMENT_CHARS
from mcp_approval.protocol import INVALID_PARAMS
from tests.support.polling import eventually
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, deployment_dir, principals
from tests.treasury.test_body_limits import status_of_unfinished_body
from tests.treasury.test_hostile_input import assert_clean_log

pytestmark = pytest.mark.anyio

DEFAULTS = ApprovalOptions()


def nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"x": value}
    return value


@pytest.mark.parametrize(
    ("note", "limit"),
    [
        ({f"k{i}": i for i in range(DEFAULTS.max_argument_members + 1)}, "approval.max_argument_members"),
        (nested(DEFAULTS.max_argument_depth + 1), "approval.max_argument_depth"),
        ("x" * (DEFAULTS.max_argument_bytes + 1), "approval.max_argument_bytes"),
    ],
    ids=["members", "depth", "bytes"],
)
async def test_arguments_over_a_limit_are_invalid_params_naming_it(
    treasury: TreasuryServer, http: httpx.AsyncClient, note: Any, limit: str
) -> None:
    order = f"o-limit-{limit}"
    # Every refund is requestable: without the limits the call would reach policy, digest and store.
    reply = await principals(http)["alice"].call_tool("refund", {"order": order, "amount": 5, "note": note})
    assert reply.status == 400, reply
    assert reply.error["code"] == INVALID_PARAMS
    assert limit in reply.error["message"]
    carol = Reviewer(http, "carol-token")
    assert [item for item in await carol.pending() if order in json.dumps(item)] == []
    assert_clean_log(treasury)


async def test_a_body_over_max_request_bytes_is_a_413_problem(
    treasury: TreasuryServer, http: httpx.AsyncClient
) -> None:
    limit = DEFAULTS.max_request_bytes
    payload = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"pad": "x" * limit}}
    response = await http.post(
        "/mcp",
        content=json.dumps(payload),
        headers={"authorization": "Bearer alice-token", "content-type": "application/json"},
    )
    assert response.status_code == 413, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert "approval.max_request_bytes" in response.json()["detail"]
    # Streamed without a length, and never finished: refused once past the limit, not buffered whole.
    status = status_of_unfinished_body(
        treasury.base_url, "/mcp", limit + 1, headers={"Authorization": "Bearer alice-token"}
    )
    assert status == 413
    assert_clean_log(treasury)


async def test_listings_summarize_large_arguments(treasury: TreasuryServer, http: httpx.AsyncClient) -> None:
    to = "acct-listed-large-" + "n" * (3 * LISTED_ARGUMENT_CHARS)
    reply = await principals(http)["alice"].call_tool("wire_transfer", {"to": to, "amount": 40_000})
    assert reply.status == 200, reply  # above 25,000: a request for approvers
    carol = Reviewer(http, "carol-token")

    async def listed() -> list[dict[str, Any]]:
        return [item for item in await carol.pending() if "acct-listed-large-" in (item.get("arguments_summary") or "")]

    (item,) = await eventually(listed, lambda items: len(items) == 1)
    assert item["arguments"] is None
    assert item["arguments_truncated"] is True
    assert len(item["arguments_summary"]) <= LISTED_ARGUMENT_CHARS
    whole = (await http.get(f"/approvals/{item['id']}", headers=carol.headers)).json()
    assert whole["arguments"]["to"] == to


# -- large calls within raised limits do not hold the event loop ----------------------------------

RAISED = {
    "max_request_bytes": 64 * 1024 * 1024,
    "max_argument_bytes": 64 * 1024 * 1024,
    "max_argument_members": 1_000_000,
}
#: Many small keys: the shape that makes canonicalization, policy mapping and sealing slow.
LARGE_KEYS = 100_000


@pytest.fixture(scope="module")
def raised(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TreasuryServer]:
    directory = deployment_dir(tmp_path_factory.mktemp("raised"), {"approval": RAISED})
    server = TreasuryServer(directory).start(timeout_s=scaled(90))
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
async def raised_http(raised: TreasuryServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=raised.base_url, timeout=scaled(120)) as client:
        yield client


async def test_a_small_request_is_answered_while_a_large_call_is_processed(
    raised: TreasuryServer, raised_http: httpx.AsyncClient
) -> None:
    wire = principals(raised_http)["alice"]
    await wire.request("tools/list")  # warm: the first request pays for imports and connections
    note = {f"k{i:06d}": i for i in range(LARGE_KEYS)}
    started = time.monotonic()
    large = asyncio.ensure_future(wire.call_tool("refund", {"order": "o-large", "amount": 5, "note": note}))
    latencies: list[float] = []
    async with httpx.AsyncClient(base_url=raised.base_url, timeout=scaled(120)) as probe_http:
        probe = principals(probe_http)["bob"]
        while not large.done():
            sent = time.monotonic()
            reply = await probe.request("tools/list")
            assert reply.status == 200, reply
            latencies.append(time.monotonic() - sent)
    reply = await large
    whole = time.monotonic() - started
    assert reply.status == 200, reply  # the large call was processed, not refused
    assert len(latencies) >= 2, (whole, latencies)
    # The server stays responsive: no small request waits for a large share of the large call
    # (with all of it on the event loop, one waited about half of it on a loaded 2-core machine).
    assert max(latencies) < 0.3 * whole, (whole, sorted(latencies)[-5:])
    assert_clean_log(raised)


def test_the_limits_are_deployment_options(tmp_path: Path) -> None:
    directory = deployment_dir(tmp_path, {"approval": {"max_argument_members": 0}})
    server = TreasuryServer(directory)
    with pytest.raises(RuntimeError, match="max_argument_members"):
        server.start(timeout_s=scaled(120))
