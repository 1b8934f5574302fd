"""CedarPDP decisions: requestable denials, re-evaluation with an approval, mapping, fail-closed cases."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

import pytest

from mcp_approval.clock import ManualClock, iso8601
from mcp_approval.policy import (
    Approval,
    CedarPDP,
    Decision,
    EntityMapping,
    EvaluationRequest,
    EvaluationsSemantic,
    NextAction,
    ToolCallMapper,
)

pytestmark = pytest.mark.anyio

POLICY = """
// Deploying to production needs a manager's approval; the approval is an input to the next decision.
@id("deploy-prod")
@requestable("manager_approval")
@display("Production deploys need a manager")
@description("A manager approves each production deploy")
@deadline("PT30M")
forbid (principal, action == Action::"tools/call", resource == tool::"deploy")
when { context.arguments has env && context.arguments.env == "prod" }
unless { context has approval };

@id("wipe-needs-two")
@requestable("two_person_rule")
@reason("second_person_required")
@deadline("PT10M")
forbid (principal, action == Action::"tools/call", resource == tool::"wipe")
unless { context has approval };

@id("wipe-also-security")
@requestable("security_review")
@deadline("PT5M")
forbid (principal, action == Action::"tools/call", resource == tool::"wipe")
unless { context has approval };

@id("interns-never-drop")
@reason("interns_may_not_drop")
forbid (principal, action == Action::"tools/call", resource == tool::"drop")
when { principal in Role::"intern" };

@id("drop-needs-approval")
@requestable("dba_approval")
forbid (principal, action == Action::"tools/call", resource == tool::"drop")
unless { context has approval };

@id("limit-checked")
@requestable("limit_raise")
forbid (principal, action == Action::"tools/call", resource == tool::"pay")
when { context.arguments.amount > 100 }
unless { context has approval };

@id("devs-use-tools")
permit (principal, action == Action::"tools/call", resource is tool)
when { principal in Role::"dev" };
"""

ENTITIES = [
    {"uid": {"type": "Role", "id": "dev"}, "attrs": {}, "parents": []},
    {"uid": {"type": "Role", "id": "intern"}, "attrs": {}, "parents": [{"type": "Role", "id": "dev"}]},
    {"uid": {"type": "user", "id": "alice"}, "attrs": {"team": "core"}, "parents": [{"type": "Role", "id": "dev"}]},
    {"uid": {"type": "user", "id": "ivan"}, "attrs": {}, "parents": [{"type": "Role", "id": "intern"}]},
]

MAPPER = ToolCallMapper()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def pdp(clock: ManualClock) -> CedarPDP:
    return CedarPDP(POLICY, json.dumps(ENTITIES), clock=clock)


def call(tool: str, principal: str = "alice", **arguments: Any) -> EvaluationRequest:
    return MAPPER.map_call(principal=principal, tool=tool, arguments=arguments)


def with_approval(request: EvaluationRequest, **approval: Any) -> EvaluationRequest:
    return request.with_context({**(request.context or {}), "approval": approval})


async def test_plain_permit_and_default_deny(pdp: CedarPDP):
    assert (await pdp.evaluate(call("deploy", env="staging"))).to_wire() == {"decision": True}
    denied = await pdp.evaluate(call("deploy", principal="mallory", env="staging"))
    assert denied.to_wire() == {"decision": False}
    assert denied.requestable_denial is None
    assert denied.next_action() is NextAction.NONE


async def test_requestable_forbid_yields_an_arap_denial(pdp: CedarPDP, clock: ManualClock):
    decision = await pdp.evaluate(call("deploy", env="prod"))
    denial = decision.requestable_denial
    assert decision.decision is False
    assert denial is not None
    uuid.UUID(denial.evaluation_id or "")  # a random UUID
    assert denial.reason == "approval_required"
    assert denial.evaluated_at == iso8601(clock.now_ms())
    assert denial.access_request.template == "manager_approval"
    assert denial.access_request.expires_at == iso8601(clock.now_ms() + 30 * 60 * 1000)
    assert denial.access_request.display == {
        "title": "Production deploys need a manager",
        "description": "A manager approves each production deploy",
    }
    assert decision.next_action() is NextAction.REQUEST
    again = await pdp.evaluate(call("deploy", env="prod"))
    assert again.requestable_denial is not None
    assert again.requestable_denial.evaluation_id != denial.evaluation_id


async def test_several_requestable_forbids_first_in_file_wins_earliest_deadline(pdp: CedarPDP, clock: ManualClock):
    denial = (await pdp.evaluate(call("wipe"))).requestable_denial
    assert denial is not None
    assert denial.access_request.template == "two_person_rule"
    assert denial.reason == "second_person_required"
    assert denial.access_request.expires_at == iso8601(clock.now_ms() + 5 * 60 * 1000)


async def test_a_non_requestable_forbid_makes_the_deny_final(pdp: CedarPDP):
    decision = await pdp.evaluate(call("drop", principal="ivan"))
    assert decision.to_wire() == {"decision": False, "context": {"reason": "interns_may_not_drop"}}
    assert decision.requestable_denial is None
    assert (await pdp.evaluate(call("drop"))).requestable_denial is not None  # alice is no intern


async def test_requestable_only_when_an_approval_could_lead_to_a_permit(pdp: CedarPDP):
    # mallory holds no role: the requestable forbid fires, but no permit would follow an approval.
    decision = await pdp.evaluate(call("deploy", principal="mallory", env="prod"))
    assert decision.to_wire() == {"decision": False}


async def test_default_deadline_applies_without_annotation(clock: ManualClock):
    policy = """
    @requestable
    forbid (principal, action, resource) unless { context has approval };
    permit (principal, action, resource);
    """
    pdp = CedarPDP(policy, clock=clock, default_deadline=timedelta(minutes=7), access_request_endpoint="https://ars")
    denial = (await pdp.evaluate(call("anything"))).requestable_denial
    assert denial is not None
    assert denial.access_request.template is None
    assert denial.access_request.endpoint == "https://ars"
    assert denial.access_request.expires_at == iso8601(clock.now_ms() + 7 * 60 * 1000)


async def test_reevaluation_with_an_approval_permits(pdp: CedarPDP, clock: ManualClock):
    request = call("deploy", env="prod")
    until = iso8601(clock.now_ms() + 3_600_000)
    decision = await pdp.evaluate(with_approval(request, id="apr_1", approved_until=until))
    assert decision.to_wire() == {"decision": True, "context": {"approval": {"approved_until": until}}}


async def test_an_approval_does_not_lift_a_final_forbid(pdp: CedarPDP, clock: ManualClock):
    until = iso8601(clock.now_ms() + 3_600_000)
    decision = await pdp.evaluate(with_approval(call("drop", principal="ivan"), id="apr_1", approved_until=until))
    assert decision.decision is False
    assert decision.context == {"reason": "interns_may_not_drop", "next_action": "none"}
    assert decision.next_action() is NextAction.NONE


async def test_an_expired_approval_is_removed_and_a_new_request_offered(pdp: CedarPDP, clock: ManualClock):
    request = call("deploy", env="prod")
    until = iso8601(clock.now_ms() + 60_000)
    assert (await pdp.evaluate(with_approval(request, id="apr_1", approved_until=until))).decision is True
    clock.advance(60_000)
    decision = await pdp.evaluate(with_approval(request, id="apr_1", approved_until=until))
    assert decision.decision is False
    assert decision.reason == "approval_expired"
    assert decision.requestable_denial is not None
    assert decision.next_action() is NextAction.REQUEST


@pytest.mark.parametrize(
    "approval",
    [
        {"approved_until": "2099-01-01T00:00:00Z"},  # no id
        {"id": "apr_1", "approved_until": "soon"},
        {"id": "apr_1", "approved_until": "2099-01-01T00:00:00"},  # no time zone
        "apr_1",
    ],
)
async def test_a_malformed_approval_is_unverifiable(pdp: CedarPDP, approval: Any):
    request = call("deploy", env="prod")
    decision = await pdp.evaluate(request.with_context({**(request.context or {}), "approval": approval}))
    assert decision.to_wire() == {
        "decision": False,
        "context": {"reason": "approval_unverifiable", "next_action": "none"},
    }


async def test_the_approval_verifier_is_asked_before_policy(clock: ManualClock):
    seen: list[tuple[EvaluationRequest, Approval]] = []

    class OnlyApr1:
        async def verify(self, request: EvaluationRequest, approval: Approval) -> str | None:
            seen.append((request, approval))
            return None if approval.id == "apr_1" else "out_of_scope"

    pdp = CedarPDP(POLICY, json.dumps(ENTITIES), clock=clock, approval_verifier=OnlyApr1())
    request = call("deploy", env="prod")
    until = iso8601(clock.now_ms() + 60_000)
    assert (await pdp.evaluate(with_approval(request, id="apr_1", approved_until=until))).decision is True
    refused = await pdp.evaluate(with_approval(request, id="apr_2", approved_until=until))
    assert refused.decision is False
    assert refused.reason == "out_of_scope"
    assert refused.context is not None
    assert refused.context["next_action"] == "request"
    assert refused.requestable_denial is not None
    assert [approval.id for _, approval in seen] == ["apr_1", "apr_2"]


async def test_an_approval_is_not_needed_where_policy_permits(pdp: CedarPDP, clock: ManualClock):
    request = call("deploy", env="staging")
    expired = iso8601(clock.now_ms() - 1)
    assert (await pdp.evaluate(with_approval(request, id="apr_1", approved_until=expired))).decision is True


async def test_a_forbid_that_fails_to_evaluate_denies(pdp: CedarPDP):
    # "limit-checked" reads context.arguments.amount, which is missing: Cedar skips that forbid.
    decision = await pdp.evaluate(call("pay"))
    assert decision.to_wire() == {"decision": False, "context": {"reason": "policy_error"}}
    assert (await pdp.evaluate(call("pay", amount=5))).decision is True
    assert (await pdp.evaluate(call("pay", amount=500))).requestable_denial is not None


async def test_resource_properties_and_the_store(clock: ManualClock):
    policy = """
    permit (principal, action == Action::"read", resource is doc)
    when { resource has owner && resource.owner == principal.name };
    permit (principal, action == Action::"audit", resource)
    when { principal has team && principal.team == "core" };
    """
    users = [{"uid": {"type": "user", "id": "alice"}, "attrs": {"name": "alice", "team": "core"}, "parents": []}]
    pdp = CedarPDP(policy, json.dumps(users), clock=clock)

    def request(action: str, subject: dict[str, Any], resource: dict[str, Any]) -> EvaluationRequest:
        return EvaluationRequest.model_validate({"subject": subject, "action": {"name": action}, "resource": resource})

    alice = {"type": "user", "id": "alice"}
    own = {"type": "doc", "id": "d1", "properties": {"owner": "alice"}}
    other = {"type": "doc", "id": "d2", "properties": {"owner": "bob"}}
    assert (await pdp.evaluate(request("read", alice, own))).decision is True
    assert (await pdp.evaluate(request("read", alice, other))).decision is False
    assert (await pdp.evaluate(request("read", alice, {"type": "doc", "id": "d3"}))).decision is False
    # A request cannot override what the entity store says about a subject ...
    spoofed = {"type": "user", "id": "alice", "properties": {"team": "ops", "name": "bob"}}
    assert (await pdp.evaluate(request("audit", spoofed, own))).decision is True
    assert (await pdp.evaluate(request("read", spoofed, other))).decision is False
    # ... but it describes subjects the store does not know.
    carol = {"type": "user", "id": "carol", "properties": {"team": "core", "name": "carol"}}
    assert (await pdp.evaluate(request("audit", carol, own))).decision is True
    assert (await pdp.evaluate(request("audit", {"type": "user", "id": "carol"}, own))).decision is False


async def test_namespace_and_type_mapping():
    policy = """
    permit (principal is Acme::Person, action == Acme::Action::"tools/call", resource is Acme::Tool)
    when { principal.level >= 3 };
    """
    mapping = EntityMapping(namespace="Acme", types={"user": "Person", "tool": "Tool"})
    pdp = CedarPDP(policy, mapping=mapping)
    request = MAPPER.map_call(principal="alice", tool="deploy", subject_properties={"level": 3})
    assert (await pdp.evaluate(request)).decision is True
    low = MAPPER.map_call(principal="alice", tool="deploy", subject_properties={"level": 2})
    assert (await pdp.evaluate(low)).decision is False


async def test_json_values_become_cedar_values():
    policy = """
    permit (principal, action, resource)
    when {
      context.arguments.count == 3 &&
      context.arguments.ratio.greaterThan(decimal("1.2")) &&
      !(context.arguments has nothing) &&
      context.arguments.tags.contains("a") &&
      context.action_properties.soft == true
    };
    """
    pdp = CedarPDP(policy)
    request = EvaluationRequest.model_validate(
        {
            "subject": {"type": "user", "id": "alice"},
            "action": {"name": "tools/call", "properties": {"soft": True}},
            "resource": {"type": "tool", "id": "t"},
            "context": {"arguments": {"count": 3.0, "ratio": 1.25, "nothing": None, "tags": ["a", None, "b"]}},
        }
    )
    assert (await pdp.evaluate(request)).decision is True


@pytest.mark.parametrize(
    "context",
    [
        {"arguments": {"x": {"__entity": {"type": "Role", "id": "dev"}}}},
        {"arguments": {"x": [{"__extn": {"fn": "ip", "arg": "127.0.0.1"}}]}},
    ],
)
async def test_request_data_cannot_forge_cedar_escapes(context: dict[str, Any]):
    pdp = CedarPDP("permit (principal, action, resource);")
    request = call("t").with_context(context)
    decision = await pdp.evaluate(request)
    assert decision.decision is False
    assert decision.reason == "invalid_request"


async def test_requests_cedar_cannot_build_are_denied():
    pdp = CedarPDP("permit (principal, action, resource);")
    bad_type = EvaluationRequest.model_validate(
        {"subject": {"type": "user-agent", "id": "a"}, "action": {"name": "x"}, "resource": {"type": "t", "id": "r"}}
    )
    decision = await pdp.evaluate(bad_type)
    assert decision.decision is False
    assert decision.reason == "invalid_request"


async def test_schema_checks_requests():
    schema = """
    entity user; entity tool;
    action "tools/call" appliesTo { principal: user, resource: tool, context: { arguments: { env: String } } };
    """
    pdp = CedarPDP("permit (principal, action, resource);", schema=schema)
    assert (await pdp.evaluate(call("deploy", env="prod"))).decision is True
    wrong = await pdp.evaluate(call("deploy", env=3))
    assert wrong.decision is False
    assert wrong.reason == "invalid_request"


async def test_evaluate_many_semantics(pdp: CedarPDP):
    requests = [call("deploy", env="staging"), call("deploy", principal="mallory"), call("deploy", env="staging")]
    assert [d.decision for d in await pdp.evaluate_many(requests)] == [True, False, True]
    first_deny = await pdp.evaluate_many(requests, EvaluationsSemantic.DENY_ON_FIRST_DENY)
    assert [d.decision for d in first_deny] == [True, False]
    first_permit = await pdp.evaluate_many(requests[1:], EvaluationsSemantic.PERMIT_ON_FIRST_PERMIT)
    assert [d.decision for d in first_permit] == [False, True]


def test_policies_are_introspectable(pdp: CedarPDP):
    requestable = sorted(p.annotations["id"] for p in pdp.policies.values() if p.requestable)
    assert requestable == [
        "deploy-prod",
        "drop-needs-approval",
        "limit-checked",
        "wipe-also-security",
        "wipe-needs-two",
    ]
    assert Decision.model_validate({"decision": False}).requestable_denial is None
