"""Clients without tasks: ``[approval] without_tasks = "request"`` opens a real approval request.

The call answers ``isError`` + ``undisclosed`` naming the request; the identical retry answers the
pending state again (no second request), then, once the request ended, its outcome exactly once.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete

from mcp_approval.approval.persistence.states import Phase
from mcp_approval.approval.without_tasks import answers as without_tasks
from mcp_approval.checks.wire import Wire, envelope
from mcp_approval.protocol import STRUCTURED_TOOL_APPROVAL
from mcp_approval.tasks.schema import tasks_table
from tests.approval.inprocess import Harness, inprocess_treasury
from tests.support.busy import until_served
from tests.support.polling import eventually
from tests.treasury.helpers import AUTHORIZATION, DISPOSITION, approval_for, text_of

pytestmark = pytest.mark.anyio
REQUEST_MODE = {"approval": {"without_tasks": "request"}}
NO_TASKS = envelope(tasks=False, elicitation=False)


def reference_of(result: dict[str, Any]) -> str:
    """The request reference the answer's text gives the model."""
    found = re.search(r"reference (\S+)\)", text_of(result))
    assert found is not None, text_of(result)
    return found.group(1)


def assert_pending(result: dict[str, Any]) -> None:
    """The honest pending answer: not run, envelope undisclosed with a context id, next steps."""
    assert result["isError"] is True
    assert result.get("resultType") != "task"
    envelope_ = result["_meta"][AUTHORIZATION]
    assert envelope_["remediation"] == "undisclosed"
    assert envelope_["authorizationContextId"]
    text = text_of(result)
    assert "did not run" in text
    assert "call wire_transfer again with exactly the same arguments" in text
    assert "expires" in text
    assert DISPOSITION not in result["_meta"]
    assert_first_asks_to_stop_and_tell(result)


def assert_first_asks_to_stop_and_tell(result: dict[str, Any]) -> None:
    """Before anything else the text asks the model to stop and tell the user, then how to check
    without a retry of the gated tool; ``structuredContent`` carries the same facts."""
    text = text_of(result)
    assert text.startswith("Stop and tell the user:")
    reference = reference_of(result)
    deadline = re.search(r"If no one decides by (\S+), it expires", text)
    assert deadline is not None, text
    status_check = text.index(f"call approval_status with reference {reference}")
    retry = text.index("Once it is approved, call wire_transfer again")
    assert text.index("you cannot approve it yourself") < status_check < retry
    # wire_transfer declares an outputSchema, which clients check structuredContent against (error
    # results included): the facts stay in the text; tools without one get them structured too.
    assert "structuredContent" not in result
    assert deadline.group(1) in text


def test_the_pending_answer_carries_its_facts_as_structured_content_too() -> None:
    """For a tool without an outputSchema the pending answer's structuredContent says what its text says."""
    result = without_tasks.pending_answer("wire_transfer", "ref-1", 1_700_000_000_000, opened=True)
    text = result.content[0].text  # type: ignore[union-attr]
    facts = result.structured_content or {}
    assert facts["status"] == "pending"
    assert facts["ran"] is False
    assert facts["reference"] == "ref-1"
    assert facts["deadline"] in text
    assert facts["tool"] == "wire_transfer"
    assert facts["decidedBy"] in text
    assert facts["checkWith"] == {"tool": "approval_status", "arguments": {"reference": "ref-1"}}
    assert facts["nextStep"].startswith("Stop and tell the user:")
    assert "approval_status with reference ref-1" in facts["nextStep"]


async def call(wire: Wire, to: str, amount: int = 30_000, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    return (await wire.call_tool("wire_transfer", {"to": to, "amount": amount}, meta=meta or NO_TASKS)).result


async def ended(harness: Harness, task_id: str) -> None:
    """Wait until the workflow left ``pending``/``claimed`` (the workflow driver decided and ran it)."""

    async def phase() -> Phase | None:
        workflow = await harness.deployment.approval.store.get(task_id)
        return None if workflow is None else workflow.phase

    await eventually(phase, lambda value: value in (Phase.FINISHED, Phase.FENCED))


def transfers(harness: Harness, account: str) -> list[dict[str, Any]]:
    return [entry for entry in harness.ledger() if entry.get("to") == account]


@pytest.mark.sep_check(
    "sep-2848-client-maturity-ordinary-tools",
    "sep-2643-undisclosed-remedy-in-content",
    "sep-2643-server-undisclosed-not-unavailable",
    "sep-2643-server-accepts-absent-or-unknown-context-id",
)
async def test_a_call_without_tasks_opens_one_request_and_says_so(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, REQUEST_MODE) as harness:
        first = await call(harness.alice, "acct-open")
        assert_pending(first)
        reference = reference_of(first)
        carol = harness.reviewer("carol")
        assert len(await carol.pending()) == 1
        assert "carol" not in text_of(first)
        context_id = first["_meta"][AUTHORIZATION]["authorizationContextId"]
        echoed = envelope(
            tasks=False, elicitation=False, extra={"io.modelcontextprotocol/authorizationContextId": context_id}
        )
        again = await call(harness.alice, "acct-open", meta=echoed)
        assert_pending(again)
        assert reference_of(again) == reference
        assert "no second request" in text_of(again)
        assert len(await carol.pending()) == 1  # the retry joined the open request
        assert transfers(harness, "acct-open") == []


@pytest.mark.sep_check("sep-2848-client-maturity-ordinary-tools")
async def test_the_retry_after_approval_answers_the_result_once_then_the_approval_is_spent(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, REQUEST_MODE) as harness:
        first = await call(harness.alice, "acct-approved")
        carol = harness.reviewer("carol")
        approval = await approval_for(carol, "wire_transfer", to="acct-approved")
        assert (await carol.decide(approval["id"], "approve")).status_code == 200
        await ended(harness, reference_of(first))
        result = await call(harness.alice, "acct-approved")
        assert result["isError"] is False
        assert result["_meta"][DISPOSITION] == "approved-executed"
        assert AUTHORIZATION not in result["_meta"]
        assert "ran once" in text_of(result)
        statement = result["structuredContent"][STRUCTURED_TOOL_APPROVAL]  # for clients that read only this
        assert statement == {"disposition": "approved-executed", "text": result["content"][-1]["text"]}
        assert "ran once" in statement["text"]
        assert result["structuredContent"]["result"] == result["content"][0]["text"]  # the tool's own, kept
        assert len(transfers(harness, "acct-approved")) == 1
        spent = await call(harness.alice, "acct-approved")  # a further identical call asks anew
        assert_pending(spent)
        assert reference_of(spent) != reference_of(first)
        assert len(transfers(harness, "acct-approved")) == 1


@pytest.mark.sep_check("sep-2848-client-maturity-ordinary-tools")
async def test_the_retry_after_denial_answers_denied_not_executed(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, REQUEST_MODE) as harness:
        first = await call(harness.alice, "acct-denied")
        carol = harness.reviewer("carol")
        approval = await approval_for(carol, "wire_transfer", to="acct-denied")
        assert (await carol.decide(approval["id"], "deny", "not this one")).status_code == 200
        await ended(harness, reference_of(first))
        result = await call(harness.alice, "acct-denied")
        assert result["isError"] is True
        assert result["_meta"][DISPOSITION] == "denied-not-executed"
        assert "did not run" in text_of(result)
        assert "not this one" not in text_of(result)
        assert transfers(harness, "acct-denied") == []


@pytest.mark.sep_check("sep-2643-server-context-id-not-authorization")
async def test_another_principal_never_joins_or_collects_a_request(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, REQUEST_MODE) as harness:
        bob = harness.alice.as_principal("bob-token")
        alice_first = await call(harness.alice, "acct-shared")
        context_id = alice_first["_meta"][AUTHORIZATION]["authorizationContextId"]
        echoing = envelope(
            tasks=False, elicitation=False, extra={"io.modelcontextprotocol/authorizationContextId": context_id}
        )
        bob_first = await call(bob, "acct-shared", meta=echoing)  # alice's handle authorizes nothing for bob
        assert reference_of(bob_first) != reference_of(alice_first)
        carol = harness.reviewer("carol")
        pending = await carol.pending()
        assert len(pending) == 2
        (alices,) = [item for item in pending if item.get("requester") == "alice"]
        assert (await carol.decide(alices["id"], "approve")).status_code == 200
        await ended(harness, reference_of(alice_first))
        bob_again = await call(bob, "acct-shared", meta=echoing)  # bob never collects alice's outcome
        assert_pending(bob_again)
        assert reference_of(bob_again) == reference_of(bob_first)
        assert (await call(harness.alice, "acct-shared"))["_meta"][DISPOSITION] == "approved-executed"


async def test_an_outcome_whose_task_was_purged_lets_the_call_ask_anew(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, REQUEST_MODE) as harness:
        first = await call(harness.alice, "acct-purged")
        carol = harness.reviewer("carol")
        approval = await approval_for(carol, "wire_transfer", to="acct-purged")
        assert (await carol.decide(approval["id"], "deny")).status_code == 200
        await ended(harness, reference_of(first))
        store = harness.deployment.approval.store
        purge = delete(tasks_table).where(tasks_table.c.task_id == reference_of(first))  # retention ended
        await store.database.write(lambda conn: conn.execute(purge))
        again = await call(harness.alice, "acct-purged")
        assert_pending(again)
        assert reference_of(again) != reference_of(first)


async def test_requests_without_tasks_count_against_the_pending_bound(tmp_path: Path) -> None:
    overrides = {"approval": {"without_tasks": "request", "max_pending_per_principal": 1}}
    async with inprocess_treasury(tmp_path, overrides) as harness:
        assert_pending(await call(harness.alice, "acct-bound-1"))
        refused = await call(harness.alice, "acct-bound-2")
        assert refused["_meta"][AUTHORIZATION]["remediation"] == "unavailable"
        assert "Too many approval requests" in text_of(refused)
        assert len(await harness.reviewer("carol").pending()) == 1


async def test_n_of_m_holds_for_a_request_without_tasks(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, REQUEST_MODE) as harness:
        runs: list[str] = []

        @harness.deployment.server.tool()
        def close_books(quarter: str) -> str:
            """Closes a quarter (needs two approvers)."""
            runs.append(quarter)
            return f"closed {quarter}"

        harness.pdp.gate("close_books", template="close_quarter")
        meta = NO_TASKS
        first = (await harness.alice.call_tool("close_books", {"quarter": "q1"}, meta=meta)).result
        reference = reference_of(first)
        for name in ("carol", "dave"):
            reviewer = harness.reviewer(name)
            approval = await approval_for(reviewer, "close_books", quarter="q1")
            assert (await reviewer.decide(approval["id"], "approve")).status_code == 200
            if name == "carol":  # one of two: still pending, the retry says so
                again = (await harness.alice.call_tool("close_books", {"quarter": "q1"}, meta=meta)).result
                assert reference_of(again) == reference
                assert runs == []
        await ended(harness, reference)
        result = (await harness.alice.call_tool("close_books", {"quarter": "q1"}, meta=meta)).result
        assert result["_meta"][DISPOSITION] == "approved-executed"
        assert "closed q1" in text_of(result)
        assert runs == ["q1"]


async def test_degraded_stays_available(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, {"approval": {"without_tasks": "degraded"}}) as harness:
        result = await call(harness.alice, "acct-degraded")
        assert result["_meta"][AUTHORIZATION]["remediation"] == "undisclosed"
        assert "reference" not in text_of(result)
        assert await harness.reviewer("carol").pending() == []


async def status(wire: Wire, reference: str) -> dict[str, Any]:
    return (await wire.call_tool("approval_status", {"reference": reference}, meta=NO_TASKS)).result


@pytest.mark.sep_check("sep-2848-client-maturity-ordinary-tools")
async def test_approval_status_tells_the_requester_where_its_request_stands(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, REQUEST_MODE) as harness:
        first = await call(harness.alice, "acct-status")
        reference = reference_of(first)
        pending = await status(harness.alice, reference)
        assert pending["isError"] is False
        assert pending["structuredContent"]["state"] == "pending"
        assert pending["structuredContent"]["deadline"]
        assert pending["structuredContent"]["pollIntervalMs"] > 0
        carol = harness.reviewer("carol")
        approval = await approval_for(carol, "wire_transfer", to="acct-status")
        assert (await carol.decide(approval["id"], "approve", "a reviewer's note")).status_code == 200
        await ended(harness, reference)
        decided = await status(harness.alice, reference)
        assert decided["structuredContent"]["disposition"] == "approved-executed"
        assert "carol" not in str(decided)
        assert "a reviewer's note" not in str(decided)
        assert len(transfers(harness, "acct-status")) == 1  # asking never runs anything again
        result = await call(harness.alice, "acct-status")  # the retry still collects the outcome
        assert result["_meta"][DISPOSITION] == "approved-executed"


async def test_another_principals_reference_answers_like_an_unknown_one(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, REQUEST_MODE) as harness:
        reference = reference_of(await call(harness.alice, "acct-foreign"))
        bob = harness.alice.as_principal("bob-token")
        foreign = await status(bob, reference)
        unknown = await status(bob, "no-such-reference")
        assert foreign["isError"] is True
        assert text_of(foreign) == text_of(unknown).replace("no-such-reference", reference)
        assert "structuredContent" not in foreign


async def test_the_status_tool_exists_only_in_request_mode(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, {"approval": {"without_tasks": "degraded"}}) as harness:
        names = [tool["name"] for tool in (await harness.alice.request("tools/list", {})).result["tools"]]
        assert "approval_status" not in names
    async with inprocess_treasury(tmp_path / "request", REQUEST_MODE) as harness:
        names = [tool["name"] for tool in (await harness.alice.request("tools/list", {})).result["tools"]]
        assert "approval_status" in names


RETRIES = 1_000


@pytest.mark.sep_check("sep-2848-at-most-once")
async def test_a_thousand_concurrent_identical_retries_after_one_approval_run_the_tool_once(tmp_path: Path) -> None:
    # A realistic intent grace: under a thousand requests on two cores a submission outlasts the
    # suite's 0.2 s, and reconciliation would (correctly) withdraw it as an orphan.
    overrides = {"approval": {"without_tasks": "request", "intent_grace_s": 30.0}}
    async with inprocess_treasury(tmp_path, overrides) as harness:
        runs: list[str] = []

        @harness.deployment.server.tool()
        def release_payment(batch: str) -> str:
            """A side-effecting tool that counts its executions."""
            runs.append(batch)
            return f"released {batch}"

        harness.pdp.gate("release_payment")
        arguments = {"batch": "b-race"}
        first = (await harness.alice.call_tool("release_payment", arguments, meta=NO_TASKS)).result
        carol = harness.reviewer("carol")
        approval = await approval_for(carol, "release_payment", batch="b-race")
        assert (await carol.decide(approval["id"], "approve")).status_code == 200
        await ended(harness, reference_of(first))

        async def retry() -> dict[str, Any]:
            return (
                await until_served(lambda: harness.alice.call_tool("release_payment", arguments, meta=NO_TASKS))
            ).result

        answers = await asyncio.gather(*(retry() for _ in range(RETRIES)))
        outcomes = [answer for answer in answers if DISPOSITION in answer.get("_meta", {})]
        assert len(outcomes) == 1  # the approval answers one retry, once
        assert outcomes[0]["_meta"][DISPOSITION] == "approved-executed"
        assert "released b-race" in text_of(outcomes[0])
        assert runs == ["b-race"]
        # The approval is spent: every other retry asks anew, and all of them join one new request.
        new_references = {reference_of(answer) for answer in answers if answer is not outcomes[0]}
        assert len(new_references) == 1
        assert new_references != {reference_of(first)}
        assert len(await carol.pending()) == 1
