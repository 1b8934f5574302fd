"""What reviewers of an ``arap-server`` see: sealed content, and only the requests they may see.

The treasury deployment over ARAP (real ``serve`` and ``arap-server`` processes): the Access
Request Service keeps its requests in its own database and shows them to reviewers at its
``/approvals`` and ``/console``. An edited request row there fails closed as it does on ``serve``,
and the same visibility rules hold (an extra principal, ``olga``, holds only the auditor role).
"""

from __future__ import annotations

import tomllib
from collections.abc import AsyncIterator, Iterator

import anyio
import httpx
import pytest
from typer.testing import CliRunner

from mcp_approval.checks.wire import Wire
from mcp_approval.cli.main import app
from tests.reviewers.conftest import CSRF
from tests.support.arap import ArapDeployment, arap_deployment, ars_store
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, principals, rewrite_request_arguments, to_toml
from tests.treasury.helpers import (
    approval_for,
    assert_approved_executed,
    assert_denied_not_executed,
    console_page,
    listed_ids,
    settled,
    shown,
)

pytestmark = pytest.mark.anyio

COMMENT = "confirmed-with-finance-by-phone"


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ArapDeployment]:
    pair = arap_deployment(tmp_path_factory.mktemp("arap-reviewers"))
    config_path = pair.directory / "arap-server.toml"
    config = tomllib.loads(config_path.read_text())
    config["principals"].append({"token": "olga-token", "id": "olga", "roles": ["auditor"]})
    config_path.write_text(to_toml(config))
    pair.start()
    try:
        yield pair
    finally:
        pair.kill()


@pytest.fixture
async def alice(deployment: ArapDeployment) -> AsyncIterator[Wire]:
    async with httpx.AsyncClient(base_url=deployment.serve.base_url, timeout=scaled(20)) as client:
        yield principals(client)["alice"]


@pytest.fixture
async def ars(deployment: ArapDeployment) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the arap-server's reviewer API and console."""
    async with httpx.AsyncClient(base_url=deployment.ars.base_url, timeout=scaled(20)) as client:
        yield client


async def test_an_edited_access_request_is_flagged_unapprovable_and_nothing_runs(
    deployment: ArapDeployment, alice: Wire, ars: httpx.AsyncClient
) -> None:
    created = (await alice.call_tool("wire_transfer", {"to": "acct-ars-attacker", "amount": 990_000})).result
    carol = Reviewer(ars, "carol-token")
    approval = await approval_for(carol, "wire_transfer", to="acct-ars-attacker")
    assert approval["integrity_failure"] is None
    rewrite_request_arguments(ars_store(deployment.directory), approval["id"], to="acct-ars-payroll", amount=26_000)

    shown = (await ars.get(f"/approvals/{approval['id']}", headers=carol.headers)).json()
    assert shown["integrity_failure"] == "the stored request does not match what was submitted"
    assert shown["arguments"] == {}
    listed = [item for item in await carol.pending() if item["id"] == approval["id"]]
    assert listed[0]["integrity_failure"] is not None
    refused = await carol.decide(approval["id"], "approve")
    assert refused.status_code == 409, refused.text

    signed_in = await ars.post("/console/login", data={"token": "carol-token"})
    assert signed_in.status_code == 303, signed_in.text
    page = await ars.get(f"/console/requests/{approval['id']}")
    assert "altered after it was submitted" in page.text
    assert 'value="approve"' not in page.text
    assert "acct-ars-payroll" not in page.text
    csrf = CSRF.search((await ars.get("/console")).text)
    assert csrf is not None
    posted = await ars.post(
        f"/console/requests/{approval['id']}/decide", data={"csrf": csrf.group(1), "decision": "approve"}
    )
    assert posted.status_code == 409, posted.text
    ars.cookies.clear()

    # The review CLI, reading the arap-server's store, checks the same seal under the same key.
    config = str(deployment.directory / "arap-server.toml")
    arguments = ["review", "approve", approval["id"], "--config", config, "--as", "dave"]
    cli = await anyio.to_thread.run_sync(lambda: CliRunner().invoke(app, arguments))
    assert cli.exit_code != 0, cli.output
    assert "cannot be approved" in cli.output

    assert (await carol.decide(approval["id"], "deny")).status_code == 200
    assert_denied_not_executed(await settled(alice, created["taskId"]))
    ran = [e for e in deployment.serve.ledger() if e.get("to") in ("acct-ars-attacker", "acct-ars-payroll")]
    assert not ran


async def test_an_unedited_access_request_survives_a_restart_approvable(
    deployment: ArapDeployment, alice: Wire, ars: httpx.AsyncClient
) -> None:
    """The seal's key comes from the configured signing key, so a new process still verifies it."""
    created = (await alice.call_tool("wire_transfer", {"to": "acct-ars-sealed", "amount": 30_000})).result
    carol = Reviewer(ars, "carol-token")
    approval = await approval_for(carol, "wire_transfer", to="acct-ars-sealed")
    deployment.ars.kill()
    deployment.ars.start()
    shown = (await ars.get(f"/approvals/{approval['id']}", headers=carol.headers)).json()
    assert shown["integrity_failure"] is None
    assert shown["arguments"]["amount"] == 30_000
    assert (await carol.decide(approval["id"], "approve")).status_code == 200
    assert_approved_executed(await settled(alice, created["taskId"], timeout_s=scaled(60)))


async def test_each_principal_sees_what_it_may_decide_its_own_or_everything_as_auditor(
    alice: Wire, ars: httpx.AsyncClient
) -> None:
    await alice.call_tool("wire_transfer", {"to": "acct-ars-visibility", "amount": 40_000})
    carol = Reviewer(ars, "carol-token")
    approval_id = (await approval_for(carol, "wire_transfer", to="acct-ars-visibility"))["id"]
    # bob (another treasurer) and erin (admin) may not decide it, and it is not theirs.
    for token in ("bob-token", "erin-token"):
        assert approval_id not in await listed_ids(ars, token, "pending")
        assert (await shown(ars, token, approval_id)).status_code == 404
    for token in ("alice-token", "olga-token", "dave-token"):  # the requester, the auditor, another approver
        assert approval_id in await listed_ids(ars, token, "pending")

    assert (await carol.decide(approval_id, "approve", COMMENT)).status_code == 200
    own = (await shown(ars, "alice-token", approval_id)).json()
    assert own["status"] == "approved"
    assert [(d["reviewer"], d["comment"]) for d in own["decisions"]] == [(None, None)]
    assert approval_id in await listed_ids(ars, "alice-token", "decided")
    for token in ("olga-token", "dave-token"):
        (decision,) = (await shown(ars, token, approval_id)).json()["decisions"]
        assert (decision["reviewer"], decision["comment"]) == ("carol", COMMENT)
    for token in ("bob-token", "erin-token"):
        assert approval_id not in await listed_ids(ars, token, "decided")

    detail = f"/console/requests/{approval_id}"
    own_page = await console_page(ars, "alice-token", detail)
    assert own_page.status_code == 200
    assert "carol" not in own_page.text
    assert COMMENT not in own_page.text
    assert (await console_page(ars, "bob-token", detail)).status_code == 404
    auditor_page = await console_page(ars, "olga-token", detail)
    assert "carol" in auditor_page.text
    assert COMMENT in auditor_page.text
    ars.cookies.clear()
