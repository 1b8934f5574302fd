"""Arguments the server cannot carry faithfully, or the tool would refuse, never become approval requests.

Integers beyond ±(2^53 - 1), lone surrogates in names or values, and arguments the tool's listed
input schema rejects are ``-32602`` naming the field, before policy: nothing is opened and the
value reaches no log. A call whose arguments the tool itself refuses after approval ends "not
executed", never "a side effect may have occurred".
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import AfterValidator

from mcp_approval.protocol import INVALID_PARAMS
from tests.approval.inprocess import Harness, inprocess_treasury
from tests.treasury.helpers import approval_for, assert_denied_not_executed, settled, text_of

pytestmark = pytest.mark.anyio

BIG = 9_007_199_254_740_993  # 2^53 + 1: RFC 8785 cannot canonicalize it
SECRET = "secret-argument-text"


@pytest.fixture
async def harness(tmp_path: Path, db_url: str) -> Any:
    async with inprocess_treasury(tmp_path, {"store": {"url": db_url}}) as running:
        running.pdp.gate("delete_account")
        yield running


async def assert_refused(
    harness: Harness, caplog: pytest.LogCaptureFixture, tool: str, arguments: dict[str, Any], *expected: str
) -> None:
    with caplog.at_level(logging.DEBUG):
        reply = await harness.alice.call_tool(tool, arguments)
    assert reply.error["code"] == INVALID_PARAMS, reply
    for part in expected:
        assert part in reply.error["message"], reply.error["message"]
    assert str(BIG) not in reply.error["message"]
    assert SECRET not in reply.error["message"]
    assert await harness.reviewer("carol").pending() == []
    assert harness.ledger() == []
    logged = "\n".join(record.getMessage() + str(record.exc_info or "") for record in caplog.records)
    assert str(BIG) not in logged
    assert SECRET not in logged
    assert [record for record in caplog.records if record.levelno >= logging.ERROR] == []


@pytest.mark.parametrize(
    ("arguments", "field", "why"),
    [
        ({"to": "acct-big", "amount": BIG}, "'amount'", "2^53"),
        ({"to": "acct-big", "amount": -BIG}, "'amount'", "2^53"),
        ({"to": "acct-big", "amount": 30_000, "memo": {"lines": [1, BIG]}}, "'memo.lines.1'", "2^53"),
        ({"to": "acct-sur", "amount": 30_000, "\ud800": None}, "ud800", "lone surrogate"),
        ({"to": f"acct-\udc00{SECRET}", "amount": 30_000}, "'to'", "lone surrogate"),
        ({"to": "acct-sur", "amount": 30_000, "memo": {"\udfff": 1}}, "memo.", "lone surrogate"),
    ],
)
async def test_unrepresentable_arguments_are_invalid_params_naming_the_field(
    harness: Harness, caplog: pytest.LogCaptureFixture, arguments: dict[str, Any], field: str, why: str
) -> None:
    await assert_refused(harness, caplog, "wire_transfer", arguments, field, why)


@pytest.mark.parametrize(
    ("tool", "arguments", "field", "why"),
    [
        ("delete_account", {"acount": "acct-1"}, "'account'", "required"),
        ("wire_transfer", {"to": "acct-t", "amount": SECRET}, "'amount'", "'type'"),
        ("wire_transfer", {"to": ["acct-t"], "amount": 30_000}, "'to'", "'type'"),
    ],
)
async def test_arguments_the_input_schema_rejects_open_nothing(
    harness: Harness, caplog: pytest.LogCaptureFixture, tool: str, arguments: dict[str, Any], field: str, why: str
) -> None:
    await assert_refused(harness, caplog, tool, arguments, field, why, "input schema")


async def test_valid_arguments_still_become_a_request(harness: Harness) -> None:
    created = (await harness.alice.call_tool("delete_account", {"account": "acct-ok"})).result
    assert created["taskId"]
    assert (await approval_for(harness.reviewer("carol"), "delete_account", account="acct-ok"))["id"]


def _without_spaces(value: str) -> str:
    if " " in value:
        raise ValueError("no spaces")
    return value


async def test_arguments_the_tool_refuses_after_approval_end_not_executed(harness: Harness) -> None:
    """The tool's own validation is stricter than its schema: it refuses before it starts."""
    ran: list[str] = []

    def rename_account(account: Annotated[str, AfterValidator(_without_spaces)]) -> str:
        ran.append(account)
        return "renamed"

    harness.deployment.server.add_tool(rename_account, name="rename_account")
    harness.pdp.gate("rename_account")
    created = (await harness.alice.call_tool("rename_account", {"account": "acct with spaces"})).result
    carol = harness.reviewer("carol")
    approval = await approval_for(carol, "rename_account", account="acct with spaces")
    assert (await carol.decide(approval["id"], "approve")).status_code == 200
    task = await settled(harness.alice, created["taskId"])
    assert_denied_not_executed(task)
    assert "refuses the call's arguments" in text_of(task["result"])
    assert "side effect" not in text_of(task["result"])
    assert ran == []
