"""A decision is one Cedar run: the probe set answers for the policy set and for the set without its
``@requestable`` forbids, exactly as evaluating both sets does."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from mcp_approval.clock import ManualClock, iso8601
from mcp_approval.policy import CedarPDP, Decision, EvaluationRequest, ToolCallMapper, cedar
from mcp_approval.policy.cedar_values import EntityMapping
from tests.policy.test_cedar_pdp import ENTITIES, POLICY

pytestmark = pytest.mark.anyio

TREASURY = Path(__file__).resolve().parents[2] / "examples" / "treasury"
MAPPER = ToolCallMapper()

#: Forbids whose evaluation fails on some requests (a missing argument), requestable or not.
ERRORING = """
@requestable("fee_review")
forbid (principal, action == Action::"tools/call", resource == tool::"fee")
when { context.arguments.fee > 10 }
unless { context has approval };

@requestable("fee_desk")
forbid (principal, action == Action::"tools/call", resource == tool::"fee")
unless { context has approval };

@reason("cap_unknown")
forbid (principal, action == Action::"tools/call", resource == tool::"cap")
when { context.arguments.cap > 10 };
"""


class CountedRuns:
    """Counts Cedar runs (each still made by Cedar)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.runs = 0
        run = cedar._is_authorized

        def counted(*args: Any) -> dict[str, Any]:
            self.runs += 1
            return run(*args)

        monkeypatch.setattr(cedar, "_is_authorized", counted)


def comparable(decision: Decision) -> dict[str, Any]:
    wire = decision.to_wire()
    (wire.get("context") or {}).pop("evaluation_id", None)  # random per decision
    return wire


def requests(clock: ManualClock) -> list[EvaluationRequest]:
    tools = ["deploy", "wipe", "drop", "pay", "fee", "cap", "other"]
    arguments: list[dict[str, Any]] = [{}, {"env": "prod"}, {"amount": 500}, {"amount": 5}, {"fee": 50}, {"cap": 50}]
    approvals = [None, {"id": "apr_1", "approved_until": iso8601(clock.now_ms() + 60_000)}]
    made = []
    for tool, principal, args, approval in itertools.product(tools, ["alice", "ivan", "nobody"], arguments, approvals):
        request = MAPPER.map_call(principal=principal, tool=tool, arguments=args)
        made.append(
            request if approval is None else request.with_context({**(request.context or {}), "approval": approval})
        )
    return made


async def test_decisions_from_one_run_match_evaluating_both_sets() -> None:
    clock = ManualClock()
    probing = CedarPDP(POLICY + ERRORING, json.dumps(ENTITIES), clock=clock)
    plain = CedarPDP(POLICY + ERRORING, json.dumps(ENTITIES), clock=clock)
    plain._probe = None  # the two-set evaluation, as a reference
    outcomes = set()
    for request in requests(clock):
        decided = await probing.evaluate(request)
        assert comparable(decided) == comparable(await plain.evaluate(request)), request
        outcomes.add((decided.decision, decided.requestable_denial is not None, (decided.context or {}).get("reason")))
    # The grid reaches permits, requestable and final denials, and policy errors alike.
    assert {(True, False, None), (False, True, "approval_required"), (False, False, "policy_error")} <= outcomes
    assert (False, False, "interns_may_not_drop") in outcomes


async def test_a_requestable_denial_is_one_cedar_run(monkeypatch: pytest.MonkeyPatch) -> None:
    pdp = CedarPDP.from_files(
        TREASURY / "policy.cedar",
        TREASURY / "entities.json",
        mapping=EntityMapping(decimals=("context.arguments.amount",)),
        clock=ManualClock(),
    )
    counted = CountedRuns(monkeypatch)
    request = MAPPER.map_call(principal="alice", tool="wire_transfer", arguments={"to": "acct-1", "amount": 30_000})
    decision = await pdp.evaluate(request)
    assert decision.requestable_denial is not None, decision.to_wire()
    assert counted.runs == 1
