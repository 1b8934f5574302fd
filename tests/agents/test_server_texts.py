"""What an agent's model reads from the server, as a client without tasks receives it: whole, and true.

The server's texts (``mcp_approval.approval``), read as an agent's client reads them.
"""

from __future__ import annotations

import re

import pytest

from mcp_approval.agents import result_text
from mcp_approval.approval.without_tasks.links import url_required_message
from mcp_approval.client import mcp_client
from tests.agents.contract import decide, new_account
from tests.support.treasury import TreasuryServer

pytestmark = pytest.mark.anyio

REFERENCE = "7u1KqS00wTgRL7q8Sk9zt3pk02I-vIp0CpAjh-_TEcM"  # a task id as the server makes them


@pytest.mark.parametrize(
    ("tool", "reference"),
    [("wire_transfer", REFERENCE), ("close_quarter_and_archive_every_ledger", REFERENCE), ("t" * 128, "r" * 512)],
)
def test_the_url_elicitation_message_fits_the_bound_with_its_instruction_whole(tool: str, reference: str) -> None:
    message = url_required_message(tool, reference, 1_796_000_000_000)
    assert len(message) <= 300
    assert "…" not in message.removesuffix(".").split("(request")[-1].split(")")[-1], message
    assert message.endswith("again with the same arguments for the outcome."), message


def test_a_usual_url_elicitation_message_names_the_tool_the_reference_and_the_deadline() -> None:
    message = url_required_message("wire_transfer", REFERENCE, 1_796_000_000_000)
    for said in ("wire_transfer did not run", REFERENCE, "2026-11-30T", "call wire_transfer again"):
        assert said in message, message


async def call(treasury: TreasuryServer, account: str) -> str:
    """``wire_transfer`` of 30,000 by alice without tasks: the answer's text."""
    async with mcp_client(f"{treasury.base_url}/mcp", auth="alice-token") as client:
        result = await client.call_tool("wire_transfer", {"to": account, "amount": 30_000})
    return result_text(result)


def reference_in(text: str) -> str:
    match = re.search(r"\(reference (\S+)\)", text)
    assert match is not None, text
    return match.group(1)


async def status(treasury: TreasuryServer, reference: str) -> dict[str, object]:
    async with mcp_client(f"{treasury.base_url}/mcp", auth="alice-token") as client:
        result = await client.call_tool("approval_status", {"reference": reference})
    return dict(result.structured_content or {})


async def test_a_call_joining_an_open_request_is_not_called_a_new_request(treasury: TreasuryServer) -> None:
    account = new_account("texts")
    first = reference_in(await call(treasury, account))
    decide(treasury, account, "deny")
    await call(treasury, account)  # collects the denial, once
    opened = await call(treasury, account)  # a new request for the identical call
    assert "This is a new request" in opened, opened
    joined = await call(treasury, account)  # the identical call while that one is open
    assert "no second request was made" in joined, joined
    assert "This is a new request" not in joined, joined
    assert f"This open request may be a repeat: an identical call (reference {first})" in joined, joined
    decide(treasury, account, "deny")


async def test_the_status_of_a_denied_request_says_it_ended(treasury: TreasuryServer) -> None:
    account = new_account("status")
    reference = reference_in(await call(treasury, account))
    assert (await status(treasury, reference))["state"] == "pending"
    decide(treasury, account, "deny")
    ended = await status(treasury, reference)
    assert ended["state"] == "ended", ended
    assert ended["disposition"] == "denied-not-executed", ended
