"""The identical earlier call a new request may duplicate: found, carried in the submission, said to the caller.

The store's read (on SQLite and PostgreSQL) finds the latest request of the same principal, tool and
arguments that ended with a disposition after reviewers saw it; the submission carries it without
changing the bodies of requests that have none; the answers to the caller name it.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from mcp_approval.approval.binding import CallBinding
from mcp_approval.approval.options import ApprovalOptions
from mcp_approval.approval.persistence.records import Intent, TaskOutcome
from mcp_approval.approval.persistence.states import IntentState
from mcp_approval.approval.persistence.store import ApprovalStore
from mcp_approval.approval.without_tasks import answers
from mcp_approval.approval.without_tasks.links import RequesterLinks
from mcp_approval.backends.contract import ApprovalSubmission, EarlierCall
from mcp_approval.backends.local.records import record_from_rows
from mcp_approval.clock import ManualClock
from mcp_approval.keyring import BindingCipher
from mcp_approval.tasks.states import TaskStatus
from tests.approval.test_admission_counts import _workflow

pytestmark = pytest.mark.anyio

DIGEST = "d" * 64
EARLIER = EarlierCall("apr_first", "task-1", "denied-not-executed", ran=False, ended_at_ms=1_700_000_000_000)
SAID = (
    "This is a new request: an identical call (reference task-1) was already asked for and ended without "
    "running at 2023-11-14T22:13:20.000Z with outcome denied-not-executed."
)


async def _open(store: ApprovalStore, number: int, *, owner: str = "alice", digest: str = DIGEST) -> str:
    """A pending task for ``owner``'s call with ``digest``, through the intent, its handle and the task."""
    task_id = f"task-{number}"
    intent = Intent(
        key=f"key-{number}",
        task_id=task_id,
        generation=1,
        principal_digest=owner,
        tool_name="deploy",
        arguments_digest=digest,
        body_sealed="k1:body",
        state=IntentState.OPEN,
        handle=None,
        created_at=0,
    )
    await store.record_intent(intent, submissions_per_minute=1000, max_pending=1000)
    assert await store.mark_submitted(intent.key, f"h-{task_id}")
    assert await store.create_task(replace(_workflow(task_id, intent.key, owner), arguments_digest=digest))
    return task_id


async def test_the_latest_request_that_ended_with_a_disposition_is_the_earlier_call(store: ApprovalStore) -> None:
    clock = ManualClock(1_000)
    store = ApprovalStore(store.database, result_retention_ms=60_000, clock=clock)

    async def earlier(owner: str = "alice", digest: str = DIGEST) -> EarlierCall | None:
        return await store.earlier_call(owner, "deploy", digest)

    assert await earlier() is None
    first = await _open(store, 1)
    assert await earlier() is None  # pending: not an earlier call, the live one
    clock.advance(1_000)
    assert await store.fence(first, TaskOutcome(TaskStatus.COMPLETED, "denied", disposition="denied-not-executed"))
    assert await earlier() == EarlierCall("h-task-1", "task-1", "denied-not-executed", ran=False, ended_at_ms=2_000)

    second = await _open(store, 2)
    assert await store.claim(second, 1, "worker-1", lease_until=10**12, deadline=10**12)
    assert await earlier() == EarlierCall("h-task-1", "task-1", "denied-not-executed", ran=False, ended_at_ms=2_000)
    clock.advance(1_000)
    assert await store.finish(second, TaskOutcome(TaskStatus.COMPLETED, "ran", disposition="approved-executed"))
    ran = EarlierCall("h-task-2", "task-2", "approved-executed", ran=True, ended_at_ms=3_000)
    assert await earlier() == ran

    third = await _open(store, 3)
    clock.advance(1_000)
    assert await store.fence(third, TaskOutcome(TaskStatus.CANCELLED, "cancelled"))  # no disposition: not decided
    assert await earlier() == ran
    assert await earlier(owner="bob") is None  # another principal's call is not this one
    assert await earlier(digest="e" * 64) is None  # nor are other arguments


def test_a_submission_carries_the_earlier_call_and_one_without_keeps_its_body() -> None:
    plain = ApprovalSubmission(tool="deploy", arguments={"env": "prod"}, requester="alice")
    assert "duplicate_of" not in plain.to_json()
    flagged = replace(plain, duplicate_of=EARLIER)
    assert flagged.to_json()["duplicate_of"] == {
        "request_id": "apr_first",
        "task_id": "task-1",
        "outcome": "denied-not-executed",
        "ran": False,
        "ended_at_ms": 1_700_000_000_000,
    }
    assert ApprovalSubmission.from_json(flagged.to_json()) == flagged
    assert flagged.digest() != plain.digest()  # sealed with the rest of the body
    assert replace(flagged, duplicate_of=None).digest() == plain.digest()


def test_a_record_whose_content_is_withheld_names_no_earlier_call() -> None:
    body = replace(ApprovalSubmission(tool="deploy", arguments={}, requester="alice"), duplicate_of=EARLIER).to_json()
    row = {
        "request_id": "apr_second",
        "status": "pending",
        "tool_name": "deploy",
        "requester": "alice",
        "template": None,
        "created_at": 0,
        "expires_at": None,
        "approved_until": None,
        "approvals_required": 1,
        "body_json": json.dumps(body),
    }
    assert record_from_rows(row, [], ()).to_json()["possible_duplicate_of"] == {
        **{k: v for k, v in EARLIER.to_json().items() if k != "ended_at_ms"},
        "ended_at": "2023-11-14T22:13:20.000Z",
        "text": "Possible duplicate of apr_first, ended without running at 2023-11-14T22:13:20.000Z "
        "(denied-not-executed).",
    }
    assert record_from_rows(row, [], (), integrity_failure="edited").possible_duplicate_of is None


def test_the_pending_answer_names_the_earlier_call_in_its_text_and_facts() -> None:
    result = answers.pending_answer("deploy", "task-2", 1_800_000_000_000, opened=True, earlier=EARLIER)
    text = result.content[0].text  # type: ignore[union-attr]
    assert text.startswith("Stop and tell the user: deploy did not run because it needs approval")
    assert f"(reference task-2). {SAID} An approver" in text
    assert (result.structured_content or {})["duplicateOf"] == {
        "reference": "task-1",
        "outcome": "denied-not-executed",
        "ran": False,
        "endedAt": "2023-11-14T22:13:20.000Z",
        "text": SAID,
    }
    plain = answers.pending_answer("deploy", "task-2", 1_800_000_000_000, opened=True)
    assert "duplicateOf" not in (plain.structured_content or {})
    assert "This is a new request" not in plain.content[0].text  # type: ignore[union-attr]


def test_the_requester_page_rounds_name_the_earlier_call() -> None:
    links = RequesterLinks(
        BindingCipher.ephemeral(), ApprovalOptions(requester_url="https://x.example/{request_token}")
    )
    binding = CallBinding(tool="deploy", arguments={"env": "prod"}, principal="alice")
    round_ = links.input_required("task-2", binding, "owner", None, earlier=EARLIER)
    assert SAID in round_.input_requests["approval_page"].params.message  # type: ignore[union-attr]
    raised = links.elicitation_required("task-2", "deploy", "owner", None, earlier=EARLIER)
    assert SAID in raised.error.data["elicitations"][0]["message"]  # type: ignore[index]
    assert (
        SAID
        not in links.elicitation_required("task-2", "deploy", "owner", None).error.data["elicitations"][0]["message"]
    )  # type: ignore[index]
