"""The ``PolicyDecisionPoint`` contract and helpers shared by its implementations."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from mcp_approval.policy.models import (
    REASON_INVALID_REQUEST,
    BatchItemError,
    Decision,
    EvaluationRequest,
    EvaluationsRequest,
    EvaluationsSemantic,
)

__all__ = [
    "PolicyDecisionPoint",
    "decide_resolved",
    "evaluate_batch",
    "evaluate_in_order",
    "item_error_decision",
    "stops_batch",
]


class PolicyDecisionPoint(Protocol):
    """Something that answers AuthZEN Access Evaluations.

    Implementations never raise for a deny or for an unreachable decision service: they fail
    closed, returning ``decision: false`` with a ``reason`` in the decision context.
    """

    async def evaluate(self, request: EvaluationRequest) -> Decision:
        """Decide one request."""
        ...

    async def evaluate_many(
        self,
        requests: Sequence[EvaluationRequest],
        semantic: EvaluationsSemantic = EvaluationsSemantic.EXECUTE_ALL,
    ) -> list[Decision]:
        """Decide several requests, in order.

        With ``execute_all`` the result has one decision per request. With
        ``deny_on_first_deny`` (``permit_on_first_permit``) evaluation stops after the first
        deny (permit), which is then the last element of the result.
        """
        ...


def stops_batch(decision: Decision, semantic: EvaluationsSemantic) -> bool:
    """Whether ``decision`` ends a batch evaluated under ``semantic``."""
    if semantic is EvaluationsSemantic.DENY_ON_FIRST_DENY:
        return not decision.decision
    if semantic is EvaluationsSemantic.PERMIT_ON_FIRST_PERMIT:
        return decision.decision
    return False


async def evaluate_in_order(
    evaluate: Callable[[EvaluationRequest], Awaitable[Decision]],
    requests: Sequence[EvaluationRequest],
    semantic: EvaluationsSemantic,
) -> list[Decision]:
    """Run ``evaluate`` on each request in turn, stopping where ``semantic`` says to."""
    decisions: list[Decision] = []
    for request in requests:
        decision = await evaluate(request)
        decisions.append(decision)
        if stops_batch(decision, semantic):
            break
    return decisions


def item_error_decision(error: BatchItemError) -> Decision:
    """The deny that stands for a batch entry that is not a complete evaluation."""
    return Decision.deny(REASON_INVALID_REQUEST, error=error.message)


async def evaluate_batch(pdp: PolicyDecisionPoint, body: EvaluationsRequest) -> list[Decision]:
    """Answer an AuthZEN batch body with ``pdp``: one decision per evaluated entry, in order.

    Defaults are applied per entry (:meth:`EvaluationsRequest.resolve`); an entry that is still
    incomplete is a deny with ``reason: invalid_request`` rather than a failure of the whole batch.
    A body without ``evaluations`` yields exactly one decision.
    """
    return await decide_resolved(pdp, body.resolve(), body.semantic)


async def decide_resolved(
    pdp: PolicyDecisionPoint, resolved: Sequence[EvaluationRequest | BatchItemError], semantic: EvaluationsSemantic
) -> list[Decision]:
    """One decision per resolved entry in order, stopping where ``semantic`` says; errors are denies.

    A batch without errors goes to the PDP in one ``evaluate_many`` call.
    """
    complete = [item for item in resolved if isinstance(item, EvaluationRequest)]
    if len(complete) == len(resolved):
        return await pdp.evaluate_many(complete, semantic)
    decisions: list[Decision] = []
    for item in resolved:
        decision = item_error_decision(item) if isinstance(item, BatchItemError) else await pdp.evaluate(item)
        decisions.append(decision)
        if stops_batch(decision, semantic):
            break
    return decisions
