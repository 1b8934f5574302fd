"""The reference an agent shows its user finds the request: in the reviewer API, the console's
search and ``mcp-approval review show``, for reviewers allowed to see it; for anyone else it is
"not found", exactly like a reference that names nothing.

Runs on a real ``serve`` process over SQLite, and over PostgreSQL in the store leg
(``MCP_APPROVAL_TEST_STORE=postgresql``).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator, Iterator

import anyio
import httpx
import pytest
from typer.testing import CliRunner, Result

from mcp_approval.cli.main import app
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, deployment_dir, principals
from tests.treasury.helpers import approval_for, console_page, shown

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def treasury(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TreasuryServer]:
    server = TreasuryServer(deployment_dir(tmp_path_factory.mktemp("treasury"))).start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
async def http(treasury: TreasuryServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=treasury.base_url, timeout=scaled(20)) as client:
        yield client


async def requested(http: httpx.AsyncClient, account: str) -> tuple[str, str]:
    """alice asks for a transfer to ``account``: the reference she is given and the request's id."""
    result = (await principals(http)["alice"].call_tool("wire_transfer", {"to": account, "amount": 40_000})).result
    assert result["resultType"] == "task", result
    approval = await approval_for(Reviewer(http, "carol-token"), "wire_transfer", to=account)
    assert approval["id"] != result["taskId"]  # the reference is not the request's id
    return str(result["taskId"]), str(approval["id"])


async def review_show(treasury: TreasuryServer, wanted: str, *options: str) -> Result:
    config = str(treasury.directory / "config.toml")
    return await anyio.to_thread.run_sync(
        lambda: CliRunner().invoke(app, ["review", "show", wanted, "--config", config, *options])
    )


async def test_the_api_finds_a_request_by_its_reference_for_those_who_may_see_it(http: httpx.AsyncClient) -> None:
    reference, request_id = await requested(http, "acct-ref-api")

    for token in ("carol-token", "dave-token", "alice-token"):  # approvers and the requester
        found = await shown(http, token, reference)
        assert found.status_code == 200, found.text
        assert found.json()["id"] == request_id
        assert found.json()["outcome"]["task_id"] == reference

    unknown = await shown(http, "carol-token", "no-such-" + secrets.token_hex(8))
    assert unknown.status_code == 404
    for token in ("bob-token", "erin-token"):  # neither may decide it nor made it: not found, not forbidden
        hidden = await shown(http, token, reference)
        assert (hidden.status_code, hidden.json()["detail"]) == (404, unknown.json()["detail"])
        refused = await Reviewer(http, token).decide(reference, "approve")
        assert refused.status_code == 404, refused.text

    decided = await Reviewer(http, "carol-token").decide(reference, "approve", "checked by reference")
    assert decided.status_code == 200, decided.text
    assert (decided.json()["id"], decided.json()["status"]) == (request_id, "approved")


async def test_the_console_search_and_request_pages_take_the_reference(http: httpx.AsyncClient) -> None:
    reference, request_id = await requested(http, "acct-ref-console")

    page = await console_page(http, "carol-token", "/console")
    assert 'action="/console/find"' in page.text  # the search box is on every page
    found = await http.get("/console/find", params={"q": f"  {reference} "})
    assert (found.status_code, found.headers["location"]) == (303, f"/console/requests/{request_id}")
    by_path = await http.get(f"/console/requests/{reference}")
    assert (by_path.status_code, by_path.headers["location"]) == (303, f"/console/requests/{request_id}")
    detail = await http.get(f"/console/requests/{request_id}")
    assert detail.status_code == 200
    assert f'id="reference">{reference}<' in detail.text  # the page shows the reference it was found by
    assert (await http.get("/console/find", params={"q": request_id})).status_code == 303  # ids work too

    await console_page(http, "bob-token", "/console")
    for path in (f"/console/find?q={reference}", f"/console/requests/{reference}", "/console/find?q=nothing-here"):
        hidden = await http.get(path)
        assert hidden.status_code == 404, path
        assert request_id not in hidden.text
    assert (await http.get("/console/find", params={"q": "x" * 600})).status_code == 404


async def test_review_show_takes_the_reference(treasury: TreasuryServer, http: httpx.AsyncClient) -> None:
    reference, request_id = await requested(http, "acct-ref-cli")

    table = await review_show(treasury, reference)
    assert table.exit_code == 0, table.output
    assert request_id in table.output
    assert reference in table.output
    document = json.loads((await review_show(treasury, reference, "--json")).output)
    assert (document["id"], document["reference"]) == (request_id, reference)
    by_id = json.loads((await review_show(treasury, request_id, "--json")).output)
    assert by_id["reference"] == reference

    missing = await review_show(treasury, "no-such-reference")
    assert missing.exit_code == 1
    assert "no approval request has the id or reference 'no-such-reference'" in missing.output
