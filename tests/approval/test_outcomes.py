"""How a workflow row and its execution events read as a request's outcome."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_approval.approval.persistence.outcomes import outcome_of
from mcp_approval.storage import AuditEvent


def _event(kind: str, at: int, **data: Any) -> AuditEvent:
    return AuditEvent(event_id=at, at=at, kind=kind, subject="task-1", actor=None, data=data)


CLAIMED = _event("approval.execution_claimed", 200, generation=1, worker="w")


@pytest.mark.parametrize(
    ("phase", "disposition", "events", "expected"),
    [
        ("pending", None, [], ("pending", None, None)),
        ("claimed", None, [CLAIMED], ("running", 200, None)),
        (
            "finished",
            "approved-executed",
            [CLAIMED, _event("approval.execution_finished", 300, disposition="approved-executed")],
            ("approved-executed", 300, None),
        ),
        (
            "finished",
            "outcome-unknown",
            [CLAIMED, _event("approval.execution_finished", 900, disposition="outcome-unknown")],
            ("outcome-unknown", 900, None),
        ),
        (
            "fenced",
            "denied-not-executed",
            [_event("approval.fenced", 400, disposition="denied-not-executed", reason="The approval request expired.")],
            ("denied-not-executed", 400, "The approval request expired."),
        ),
        (
            "fenced",
            None,
            [_event("approval.fenced", 500, status="cancelled", disposition=None)],
            ("cancelled", 500, None),
        ),
        ("fenced", None, [_event("approval.fenced", 600, status="failed", disposition=None)], ("failed", 600, None)),
        # Events pruned or never written: the workflow row still tells how it ended.
        ("finished", "execution-error", [], ("execution-error", 50, None)),
    ],
)
def test_a_workflow_reads_as_its_outcome(
    phase: str, disposition: str | None, events: list[AuditEvent], expected: tuple[str, int | None, str | None]
) -> None:
    row = {"task_id": "task-1", "phase": phase, "disposition": disposition, "updated_at": 50}
    found = outcome_of(row, events)
    assert (found.state, found.at, found.reason) == expected
    assert found.task_id == "task-1"


def test_the_outcome_text_carries_the_reason() -> None:
    row = {"task_id": "t", "phase": "fenced", "disposition": "denied-not-executed", "updated_at": 1}
    fenced = _event("approval.fenced", 2, disposition="denied-not-executed", reason="Policy denied the call.")
    assert outcome_of(row, [fenced]).text == "Not executed. Policy denied the call."
