"""The generous body rule: a body fails only when its words contradict the outcome the structure
states, or say nothing of it. The wordings come from real servers and from the mutants."""

from __future__ import annotations

import pytest

from mcp_approval.checks.judge import denial_body_problem, executed_body_problem, presents_as_done
from tests.checks.sep_wording import WORDINGS


@pytest.mark.parametrize(
    "body",
    [
        "The approval request was denied. The tool did not run, so nothing changed. (tool: wire_transfer)",
        "the tool was not called and no money moved",
        "Declined by the reviewers.",
        "The approval request expired before anyone decided.",
        "Nobody answered in time, so it lapsed; nothing happened.",
        *(wording.denied for wording in WORDINGS.values()),
        *(wording.expired for wording in WORDINGS.values()),
    ],
)
def test_a_denial_worded_any_way_that_states_it_passes(body: str) -> None:
    assert denial_body_problem(body) is None


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("Request closed.", "does not state that the tool did not run"),
        ("", "does not state that the tool did not run"),
        ("Denied. Transfer completed.", "claims the action happened"),
        ("Denied for now; the payment will run once approved.", "will still run"),
    ],
)
def test_a_denial_that_contradicts_or_says_nothing_fails(body: str, why: str) -> None:
    problem = denial_body_problem(body)
    assert problem is not None
    assert why in problem


@pytest.mark.parametrize(
    "body",
    [
        "Transfer of $30,000.00 to acct-1 completed.",
        "Sent $100; no other transfer was made.",
        *(wording.paid.format(amount=1, to="acct-1") for wording in WORDINGS.values()),
    ],
)
def test_an_executed_body_that_does_not_deny_running_passes(body: str) -> None:
    assert executed_body_problem(body) is None


@pytest.mark.parametrize("body", ["Approved, but the tool did not run.", "The call was never executed.", ""])
def test_an_executed_body_that_says_it_did_not_run_fails(body: str) -> None:
    assert executed_body_problem(body) is not None


@pytest.mark.parametrize(
    ("text", "done"),
    [
        ("Payment completed.", True),
        ("Transfer executed successfully.", True),
        ("pay needs approval; it runs only if approved.", False),
        ("Transfers over $25,000 require treasury approval.", False),
        (
            "An identical call already ran at 10:00 with outcome approved-executed; this one is waiting for approval.",
            False,
        ),
        ("Once approved, the transfer will be executed.", False),
        *((wording.pending, False) for wording in WORDINGS.values()),
        *((wording.immediate, False) for wording in WORDINGS.values()),
    ],
)
def test_a_pending_text_presents_the_action_as_done_only_when_it_claims_it_unqualified(text: str, done: bool) -> None:
    assert (presents_as_done(text) is not None) is done
