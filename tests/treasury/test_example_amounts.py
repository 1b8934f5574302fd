"""The treasury example served as shipped: amounts with cents work, zero and negative ones never run.

One real ``serve`` process of a private copy of ``examples/treasury`` (the module's ``treasury``
fixture); each test uses its own accounts and orders.
"""

from __future__ import annotations

import httpx
import pytest

from tests.support.treasury import Reviewer, TreasuryServer, principals
from tests.treasury.helpers import AUTHORIZATION, approval_for, assert_approved_executed, settled, transfers_to

pytestmark = pytest.mark.anyio


async def test_a_transfer_with_cents_runs_at_once(treasury: TreasuryServer, http: httpx.AsyncClient) -> None:
    alice = principals(http)["alice"]
    result = (await alice.call_tool("wire_transfer", {"to": "acct-cents", "amount": 1234.56})).result
    assert result["isError"] is False, result
    assert result.get("resultType") != "task"
    assert [entry["amount"] for entry in transfers_to(treasury, "acct-cents")] == [1234.56]


async def test_a_large_transfer_with_cents_waits_for_an_approver(
    treasury: TreasuryServer, http: httpx.AsyncClient
) -> None:
    alice = principals(http)["alice"]
    created = (await alice.call_tool("wire_transfer", {"to": "acct-big-cents", "amount": 30_000.5})).result
    assert created["resultType"] == "task"
    carol = Reviewer(http, "carol-token")
    approval = await approval_for(carol, "wire_transfer", to="acct-big-cents")
    assert (await carol.decide(approval["id"], "approve")).status_code == 200
    assert_approved_executed(await settled(alice, created["taskId"]))
    assert [entry["amount"] for entry in transfers_to(treasury, "acct-big-cents")] == [30_000.5]


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("refund", {"order": "ord-negative", "amount": -250}),
        ("refund", {"order": "ord-zero", "amount": 0}),
        ("wire_transfer", {"to": "acct-negative", "amount": -30_000}),
    ],
)
async def test_zero_and_negative_amounts_are_a_final_denial_without_a_request(
    treasury: TreasuryServer, http: httpx.AsyncClient, tool: str, arguments: dict[str, object]
) -> None:
    result = (await principals(http)["alice"].call_tool(tool, arguments)).result
    assert result.get("resultType") != "task", "no approval can make a non-positive amount sensible"
    assert result["isError"] is True
    assert result["_meta"][AUTHORIZATION]["remediation"] == "unavailable"
    carol = Reviewer(http, "carol-token")
    assert not [item for item in await carol.pending() if item["arguments"] == arguments]
    assert {"op": tool, **arguments} not in treasury.ledger()
    assert "reason=amount_not_positive" in treasury.log()


async def test_a_refund_with_cents_is_approved_by_the_rule(treasury: TreasuryServer, http: httpx.AsyncClient) -> None:
    alice = principals(http)["alice"]
    created = (await alice.call_tool("refund", {"order": "ord-cents", "amount": 20.5})).result
    assert_approved_executed(await settled(alice, created["taskId"]))
    assert [e["amount"] for e in treasury.ledger() if e.get("order") == "ord-cents"] == [20.5]
