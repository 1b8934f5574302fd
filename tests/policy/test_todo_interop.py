"""The AuthZEN Todo interop decisions (40 single + 3 batch) against CedarPDP and examples/authzen-todo."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_approval.policy import CedarPDP, EvaluationRequest, EvaluationsRequest, evaluate_batch
from tests.policy.conftest import TODO_ENTITIES, TODO_POLICY, TODO_SCHEMA, interop_decisions

pytestmark = pytest.mark.anyio

DECISIONS: dict[str, list[dict[str, Any]]] = interop_decisions()


@pytest.fixture(params=["schema", "no-schema"])
def todo_pdp(request: pytest.FixtureRequest) -> CedarPDP:
    schema = TODO_SCHEMA if request.param == "schema" else None
    return CedarPDP.from_files(TODO_POLICY, TODO_ENTITIES, schema)


def test_the_interop_set_is_the_published_one():
    assert len(DECISIONS["evaluation"]) == 40
    assert len(DECISIONS["evaluations"]) == 3


async def test_todo_interop_passes_43_of_43(todo_pdp: CedarPDP):
    passed, failures = 0, []
    for case in DECISIONS["evaluation"]:
        decision = await todo_pdp.evaluate(EvaluationRequest.model_validate(case["request"]))
        if decision.to_wire() == {"decision": case["expected"]}:
            passed += 1
        else:
            failures.append((case["request"], case["expected"], decision.to_wire()))
    for case in DECISIONS["evaluations"]:
        decisions = await evaluate_batch(todo_pdp, EvaluationsRequest.model_validate(case["request"]))
        if [decision.to_wire() for decision in decisions] == case["expected"]:
            passed += 1
        else:
            failures.append((case["request"], case["expected"], [d.to_wire() for d in decisions]))
    print(f"AuthZEN Todo interop: {passed}/43")
    assert failures == []
    assert passed == 43


@pytest.mark.parametrize(
    "case",
    DECISIONS["evaluation"],
    ids=lambda c: f"{c['request']['action']['name']}-{c['request']['subject']['id'][:8]}",
)
async def test_single_decision(todo_pdp: CedarPDP, case: dict[str, Any]):
    decision = await todo_pdp.evaluate(EvaluationRequest.model_validate(case["request"]))
    assert decision.decision is case["expected"]


async def test_a_policy_that_permits_everything_fails_the_set():
    """The interop check can fail: a permissive policy does not pass it."""
    pdp = CedarPDP("permit (principal, action, resource);")
    results = [
        (await pdp.evaluate(EvaluationRequest.model_validate(case["request"]))).decision == case["expected"]
        for case in DECISIONS["evaluation"]
    ]
    assert results.count(False) == sum(1 for case in DECISIONS["evaluation"] if not case["expected"]) > 0
