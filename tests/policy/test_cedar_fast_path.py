"""The embedded PDP decides the same through cedarpy's single-request entry point and its public API."""

from __future__ import annotations

import pytest

from mcp_approval.policy import CedarPDP, ToolCallMapper, cedar

pytestmark = pytest.mark.anyio

POLICY = """
permit (principal, action == Action::"tools/call", resource);
forbid (principal, action == Action::"tools/call", resource == tool::"drop_table");
@requestable("deploy_approval")
forbid (principal, action == Action::"tools/call", resource == tool::"deploy")
when { context has arguments && context.arguments has env && context.arguments.env == "prod" }
unless { context has approval };
forbid (principal, action == Action::"tools/call", resource == tool::"broken")
when { principal.missing == 1 };
"""
SCHEMA = """
entity user; entity tool;
action "tools/call" appliesTo { principal: user, resource: tool, context: { arguments?: { env?: String } } };
"""
CASES = [
    ("echo", {}),
    ("drop_table", {}),
    ("deploy", {"env": "prod"}),
    ("deploy", {"env": "dev"}),
    ("broken", {}),
]


async def _decisions(pdp: CedarPDP) -> list[dict[str, object]]:
    mapper = ToolCallMapper()
    decisions = []
    for tool, arguments in CASES:
        decision = await pdp.evaluate(mapper.map_call(principal="alice", tool=tool, arguments=arguments))
        wire = decision.to_wire()
        for key in ("evaluation_id", "evaluated_at"):
            (wire.get("context") or {}).pop(key, None)
        access_request = (wire.get("context") or {}).get("access_request") or {}
        access_request.pop("expires_at", None)
        decisions.append(wire)
    return decisions


@pytest.mark.parametrize("schema", [None, SCHEMA])
async def test_public_api_fallback_decides_the_same(monkeypatch: pytest.MonkeyPatch, schema: str | None):
    policy = POLICY if schema is None else POLICY.replace("principal.missing == 1", 'resource == tool::"never"')
    fast = await _decisions(CedarPDP(policy, schema=schema))
    monkeypatch.setattr(cedar, "_is_authorized_json", None)
    slow = await _decisions(CedarPDP(policy, schema=schema))
    assert fast == slow
    # Without a schema the erroring forbid on "broken" denies (policy_error); with one it is replaced.
    assert [decision["decision"] for decision in fast] == [True, False, False, True, schema is not None]


async def test_unknown_context_attribute_is_rejected_with_the_schema():
    pdp = CedarPDP(POLICY.replace("principal.missing == 1", 'resource == tool::"never"'), schema=SCHEMA)
    request = ToolCallMapper().map_call(principal="alice", tool="echo", arguments={"bogus": "x"})
    decision = await pdp.evaluate(request)
    assert not decision.decision
    assert decision.reason == "invalid_request"
