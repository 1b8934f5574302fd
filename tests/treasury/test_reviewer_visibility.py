"""Who sees which approval requests, and reviewer listings in pages, on a real ``serve`` process.

A principal sees the requests it may decide, its own requests without who decided them, or every
request with the auditor role; the API, the console and the CLI list them a page at a time with a
total and a sign that more exist.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import httpx
import pytest
from click.testing import Result
from typer.testing import CliRunner

from mcp_approval.cli.main import app
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, deployment_dir, principals, to_toml
from tests.treasury.helpers import approval_for, console_page, listed_ids, shown

pytestmark = pytest.mark.anyio

COMMENT = "checked-with-finance-by-phone"


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TreasuryServer]:
    """The treasury deployment with one more principal, ``olga``, who holds only the auditor role."""
    directory = deployment_dir(tmp_path_factory.mktemp("treasury"))
    config = tomllib.loads((directory / "config.toml").read_text())
    config["principals"].append({"token": "olga-token", "id": "olga", "roles": ["auditor"]})
    (directory / "config.toml").write_text(to_toml(config))
    server = TreasuryServer(directory).start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
async def http(audited: TreasuryServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=audited.base_url, timeout=scaled(20)) as client:
        yield client


async def test_each_principal_sees_what_it_may_decide_its_own_or_everything_as_auditor(
    http: httpx.AsyncClient,
) -> None:
    await principals(http)["alice"].call_tool("wire_transfer", {"to": "acct-visibility", "amount": 40_000})
    carol = Reviewer(http, "carol-token")
    approval = await approval_for(carol, "wire_transfer", to="acct-visibility")
    approval_id = approval["id"]
    # bob (another treasurer) and erin (admin) may not decide it, and it is not theirs.
    for token in ("bob-token", "erin-token"):
        assert approval_id not in await listed_ids(http, token, "pending")
        assert (await shown(http, token, approval_id)).status_code == 404
    assert approval_id in await listed_ids(http, "alice-token", "pending")
    assert approval_id in await listed_ids(http, "olga-token", "pending")
    assert approval_id in await listed_ids(http, "dave-token", "pending")  # another approver

    assert (await carol.decide(approval_id, "approve", COMMENT)).status_code == 200
    own = (await shown(http, "alice-token", approval_id)).json()
    assert own["status"] == "approved"
    assert own["decisions"] == [
        {
            "reviewer": None,
            "on_behalf_of": None,
            "decision": "approve",
            "comment": None,
            "decided_at": own["decisions"][0]["decided_at"],
        }
    ]
    assert approval_id in await listed_ids(http, "alice-token", "decided")
    for token in ("olga-token", "dave-token"):
        (decision,) = (await shown(http, token, approval_id)).json()["decisions"]
        assert (decision["reviewer"], decision["comment"]) == ("carol", COMMENT)
    for token in ("bob-token", "erin-token"):
        assert approval_id not in await listed_ids(http, token, "decided")

    # The console applies the same rules: its pages and the request's audit trail.
    detail = f"/console/requests/{approval_id}"
    own_page = await console_page(http, "alice-token", detail)
    assert own_page.status_code == 200
    assert "carol" not in own_page.text
    assert COMMENT not in own_page.text
    decided_page = await http.get("/console/decided")
    assert approval_id in decided_page.text
    assert "carol" not in decided_page.text
    assert (await console_page(http, "bob-token", detail)).status_code == 404
    assert approval_id not in (await http.get("/console/decided")).text
    auditor_page = await console_page(http, "olga-token", detail)
    assert "carol" in auditor_page.text
    assert COMMENT in auditor_page.text


async def test_listings_come_in_pages_with_a_total_and_the_next_offset(
    audited: TreasuryServer, http: httpx.AsyncClient
) -> None:
    bob = principals(http)["bob"]
    for index in range(3):
        await bob.call_tool("wire_transfer", {"to": f"acct-page-{index}", "amount": 30_000 + index})
    olga = Reviewer(http, "olga-token")
    await approval_for(olga, "wire_transfer", to="acct-page-2")
    pages: list[dict[str, Any]] = []
    offset: int | None = 0
    while offset is not None:
        response = await http.get("/approvals", params={"limit": 2, "offset": offset}, headers=olga.headers)
        assert response.status_code == 200, response.text
        pages.append(response.json())
        offset = pages[-1]["next_offset"]
    ids = [item["id"] for page in pages for item in page["approvals"]]
    total = pages[0]["total"]
    assert total >= 3
    assert len(ids) == len(set(ids)) == total
    assert len(pages) == -(-total // 2)
    assert all(len(page["approvals"]) == 2 for page in pages[:-1])
    assert {item["arguments"]["to"] for page in pages for item in page["approvals"]} >= {
        "acct-page-0",
        "acct-page-1",
        "acct-page-2",
    }
    for query in ({"limit": 0}, {"limit": 201}, {"offset": -1}, {"limit": "x"}):
        refused = await http.get("/approvals", params=query, headers=olga.headers)
        assert refused.status_code == 400, (query, refused.text)

    # The CLI pages the same way, and says where the next page starts.
    config = str(audited.directory / "config.toml")

    async def review_list(*args: str) -> Result:
        return await anyio.to_thread.run_sync(
            lambda: CliRunner().invoke(app, ["review", "list", "--config", config, *args])
        )

    first = await review_list("--limit", "2", "--json")
    assert first.exit_code == 0, first.output
    document = json.loads(first.output)
    assert (len(document["approvals"]), document["total"], document["next_offset"]) == (2, total, 2)
    table = await review_list("--limit", "2")
    assert table.exit_code == 0, table.output
    assert f"1-2 of {total}; the next page: --offset 2" in table.output
    last = await review_list("--offset", str(total - 1), "--json")
    assert json.loads(last.output)["next_offset"] is None
