"""What a reviewer approves is what runs: a request row edited in the database fails closed.

The attack: the stored request body is rewritten to show a harmless transfer while the sealed
call binding (what would run) still names another. The edited request is flagged, shown without
its content, cannot be approved through the API or the console, and nothing runs.
"""

from __future__ import annotations

import httpx
import pytest

from tests.reviewers.conftest import CSRF
from tests.support.treasury import Reviewer, TreasuryServer, deployment_store, principals, rewrite_request_arguments
from tests.treasury.helpers import approval_for, assert_approved_executed, assert_denied_not_executed, settled

pytestmark = pytest.mark.anyio


async def test_an_edited_request_is_flagged_unapprovable_and_nothing_runs(
    treasury: TreasuryServer, http: httpx.AsyncClient
) -> None:
    alice = principals(http)["alice"]
    created = (await alice.call_tool("wire_transfer", {"to": "acct-attacker", "amount": 990_000})).result
    carol = Reviewer(http, "carol-token")
    approval = await approval_for(carol, "wire_transfer", to="acct-attacker")
    assert approval["integrity_failure"] is None
    rewrite_request_arguments(deployment_store(treasury.directory), approval["id"], to="acct-payroll", amount=26_000)

    shown = (await http.get(f"/approvals/{approval['id']}", headers=carol.headers)).json()
    assert shown["integrity_failure"] == "the stored request does not match what was submitted"
    assert shown["arguments"] == {}  # the edited content is never presented as the request
    listed = [item for item in await carol.pending() if item["id"] == approval["id"]]
    assert listed[0]["integrity_failure"] is not None
    assert listed[0]["arguments"] == {}

    refused = await carol.decide(approval["id"], "approve")
    assert refused.status_code == 409, refused.text
    assert "cannot be approved" in refused.json()["detail"]

    signed_in = await http.post("/console/login", data={"token": "carol-token"})
    assert signed_in.status_code == 303, signed_in.text
    page = await http.get(f"/console/requests/{approval['id']}")
    assert "altered after it was submitted" in page.text
    assert 'value="approve"' not in page.text
    assert "acct-payroll" not in page.text
    csrf = CSRF.search((await http.get("/console")).text)
    assert csrf is not None
    form = {"csrf": csrf.group(1), "decision": "approve"}
    posted = await http.post(f"/console/requests/{approval['id']}/decide", data=form)
    assert posted.status_code == 409, posted.text

    # Denying it is still possible, and ends the task without running anything.
    assert (await carol.decide(approval["id"], "deny")).status_code == 200
    assert_denied_not_executed(await settled(alice, created["taskId"]))
    assert not [entry for entry in treasury.ledger() if entry.get("to") in ("acct-attacker", "acct-payroll")]


async def test_an_unedited_request_is_verified_and_approvable(
    treasury: TreasuryServer, http: httpx.AsyncClient
) -> None:
    alice = principals(http)["alice"]
    created = (await alice.call_tool("wire_transfer", {"to": "acct-sealed", "amount": 30_000})).result
    carol = Reviewer(http, "carol-token")
    approval = await approval_for(carol, "wire_transfer", to="acct-sealed")
    assert approval["integrity_failure"] is None
    assert approval["arguments"]["amount"] == 30_000
    assert (await carol.decide(approval["id"], "approve")).status_code == 200
    assert_approved_executed(await settled(alice, created["taskId"]))
