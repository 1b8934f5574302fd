"""What happened after an approval request was decided: did the call run?

A local approval request is decided by reviewers; the call it approves is run (or not) by the
approval layer above. The reviewer API and the console show both through an
:class:`OutcomeReader`, which the composition passes in (the approval layer implements it over
its workflow records and audit events); without one they show the decision alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Protocol

from mcp_approval.clock import iso8601

__all__ = ["OUTCOME_TEXT", "OutcomeReader", "RequestOutcome"]

#: A short sentence per :attr:`RequestOutcome.state`, for people.
OUTCOME_TEXT: Final[dict[str, str]] = {
    "pending": "Not run yet: the call waits for its decision or for its turn to run.",
    "running": "Running: the call was claimed for execution and has not finished.",
    "approved-executed": "Executed: the call ran once and succeeded.",
    "execution-error": "Executed with an error: the call ran and reported an error; a side effect may have occurred.",
    "outcome-unknown": "Outcome unknown: the call may have run, but its result could not be confirmed.",
    "denied-not-executed": "Not executed.",
    "cancelled": "Not executed: the call was cancelled.",
    "failed": "Not executed: the approval service failed.",
}


@dataclass(frozen=True)
class RequestOutcome:
    """The fate of the call behind one approval request.

    Attributes:
        task_id: the task that carries the call.
        state: ``pending``, ``running``, or how it ended: a disposition (``approved-executed``,
            ``denied-not-executed``, ``execution-error``, ``outcome-unknown``), ``cancelled`` or
            ``failed``.
        at: when it reached ``state`` (epoch ms): when it ended, or when the run was claimed.
        reason: for ``denied-not-executed``, why the call did not run (denied, expired, the
            policy re-check, the caller no longer authorized, ...), as the requester was told.
    """

    task_id: str
    state: str
    at: int | None = None
    reason: str | None = None

    @property
    def text(self) -> str:
        """The state in words, with the reason when there is one."""
        sentence = OUTCOME_TEXT.get(self.state, self.state)
        return f"{sentence} {self.reason}" if self.reason else sentence

    def to_json(self) -> dict[str, Any]:
        """The reviewer API's ``outcome`` member."""
        return {
            "task_id": self.task_id,
            "state": self.state,
            "at": iso8601(self.at) if self.at is not None else None,
            "reason": self.reason,
            "text": self.text,
        }


class OutcomeReader(Protocol):
    """Where the reviewer API and the console learn what happened to a request's call."""

    async def outcome(self, request_id: str) -> RequestOutcome | None:
        """The outcome of the call ``request_id`` was opened for, or ``None`` if none is known."""
        ...

    async def request_of(self, task_id: str) -> str | None:
        """The request (its id) the task ``task_id`` waits on or waited on, or ``None``.

        A task's id is the reference its requester is given, so a reviewer can find the request by it.
        """
        ...
