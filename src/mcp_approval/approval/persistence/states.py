"""The approval workflow's execution phases and dispositions, as explicit tables.

A workflow's phase is separate from its task's wire status (which stays ``working`` through the
claim, SEP-2848 §Completion):

========  ==============================================================================
phase     meaning
========  ==============================================================================
pending   waiting for the backend, or re-evaluating; nothing has run
claimed   the single execution claim was won; the tool runs (or ran) at most once
finished  the claimed execution's result is stored
fenced    denied, expired, cancelled or failed before any claim; it can never execute
========  ==============================================================================

``pending → claimed`` is the one compare-and-set that authorizes execution; ``pending →
fenced`` is its exclusive alternative (cancellation, expiry, denial). Both guard on
``pending``, so exactly one of them can win.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from mcp_approval.protocol import (
    DISPOSITION_APPROVED_EXECUTED,
    DISPOSITION_DENIED_NOT_EXECUTED,
    DISPOSITION_EXECUTION_ERROR,
    DISPOSITION_OUTCOME_UNKNOWN,
)

__all__ = [
    "INTENT_TRANSITIONS",
    "IN_FLIGHT_INTENTS",
    "PHASE_TRANSITIONS",
    "UNSETTLED_INTENTS",
    "Disposition",
    "IntentState",
    "Phase",
    "intent_sources",
    "phase_sources",
]


class Phase(StrEnum):
    """Where a workflow stands with respect to execution."""

    PENDING = "pending"
    CLAIMED = "claimed"
    FINISHED = "finished"
    FENCED = "fenced"


PHASE_TRANSITIONS: Final[dict[Phase, frozenset[Phase]]] = {
    Phase.PENDING: frozenset({Phase.CLAIMED, Phase.FENCED}),
    Phase.CLAIMED: frozenset({Phase.FINISHED}),
    Phase.FINISHED: frozenset(),
    Phase.FENCED: frozenset(),
}


def phase_sources(target: Phase) -> frozenset[Phase]:
    """The phases from which ``target`` may be reached: the guard of its compare-and-set."""
    return frozenset(source for source, targets in PHASE_TRANSITIONS.items() if target in targets)


class Disposition(StrEnum):
    """``io.modelcontextprotocol/tool-approval-disposition`` of a completed approval task."""

    APPROVED_EXECUTED = DISPOSITION_APPROVED_EXECUTED
    DENIED_NOT_EXECUTED = DISPOSITION_DENIED_NOT_EXECUTED
    EXECUTION_ERROR = DISPOSITION_EXECUTION_ERROR
    OUTCOME_UNKNOWN = DISPOSITION_OUTCOME_UNKNOWN


class IntentState(StrEnum):
    """A submission intent: recorded before the backend is contacted, then bound to a task."""

    OPEN = "open"  # recorded; the backend may or may not have the request
    SUBMITTED = "submitted"  # the backend's handle is persisted; the task may not exist yet
    BOUND = "bound"  # the task holds it as its current generation
    CONSUMED = "consumed"  # superseded by a chained request; its callbacks are ignored
    # Claimed by reconciliation as an orphan (no task was created in time); its backend request is
    # being withdrawn. The claim is what a late task creation loses to: it binds only a submitted intent.
    WITHDRAWING = "withdrawing"
    ABANDONED = "abandoned"  # settled without a task: refused by the backend, or withdrawn after a crash


INTENT_TRANSITIONS: Final[dict[IntentState, frozenset[IntentState]]] = {
    IntentState.OPEN: frozenset({IntentState.SUBMITTED, IntentState.WITHDRAWING, IntentState.ABANDONED}),
    IntentState.SUBMITTED: frozenset({IntentState.BOUND, IntentState.WITHDRAWING, IntentState.ABANDONED}),
    IntentState.BOUND: frozenset({IntentState.CONSUMED}),
    IntentState.CONSUMED: frozenset(),
    IntentState.WITHDRAWING: frozenset({IntentState.ABANDONED}),
    IntentState.ABANDONED: frozenset(),
}

#: Intents a dedup lookup matches: an approval that may still become (or already is) a task.
IN_FLIGHT_INTENTS: Final = frozenset({IntentState.OPEN, IntentState.SUBMITTED})
#: Intents reconciliation still has to settle: in flight, or being withdrawn.
UNSETTLED_INTENTS: Final = IN_FLIGHT_INTENTS | {IntentState.WITHDRAWING}


def intent_sources(target: IntentState) -> frozenset[IntentState]:
    """The intent states from which ``target`` may be reached."""
    return frozenset(source for source, targets in INTENT_TRANSITIONS.items() if target in targets)
