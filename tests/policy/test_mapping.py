"""tools/call → AuthZEN mapping, with per-tool rules."""

from __future__ import annotations

import pytest

from mcp_approval.policy import ToolCallMapper, ToolMappingError, ToolRule
from mcp_approval.policy.mapping import argument_at


def test_default_mapping():
    request = ToolCallMapper().map_call(
        principal="alice", tool="deploy", arguments={"env": "prod"}, client={"name": "agent", "version": "1"}
    )
    assert request.to_wire() == {
        "subject": {"type": "user", "id": "alice"},
        "action": {"name": "tools/call"},
        "resource": {"type": "tool", "id": "deploy"},
        "context": {"arguments": {"env": "prod"}, "client": {"name": "agent", "version": "1"}},
    }


def test_resource_from_an_argument():
    mapper = ToolCallMapper(
        subject_type="agent",
        rules={
            "delete_repo": ToolRule(
                action="repo.delete",
                resource_type="repository",
                resource_id_from="target.repo",
                resource_properties_from={"owner": "target.owner", "first_tag": "tags.0"},
                include_arguments=False,
            )
        },
    )
    request = mapper.map_call(
        principal="bot-7",
        tool="delete_repo",
        arguments={"target": {"repo": "acme/api", "owner": "acme"}, "tags": ["v1", "v2"]},
    )
    assert request.to_wire() == {
        "subject": {"type": "agent", "id": "bot-7"},
        "action": {"name": "repo.delete"},
        "resource": {"type": "repository", "id": "acme/api", "properties": {"owner": "acme", "first_tag": "v1"}},
        "context": {"tool": "delete_repo"},
    }
    other = mapper.map_call(principal="bot-7", tool="list_repos")
    assert other.resource.id == "list_repos"
    assert other.action.name == "tools/call"


def test_fixed_resource_id_and_integer_ids():
    mapper = ToolCallMapper(
        rules={"a": ToolRule(resource_id="shared-db"), "b": ToolRule(resource_type="ticket", resource_id_from="n")}
    )
    assert mapper.map_call(principal="p", tool="a").resource.id == "shared-db"
    assert mapper.map_call(principal="p", tool="a").context == {"arguments": {}, "tool": "a"}
    assert mapper.map_call(principal="p", tool="b", arguments={"n": 42}).resource.id == "42"


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"target": {}},
        {"target": {"repo": ""}},
        {"target": {"repo": ["x"]}},
        {"target": {"repo": True}},
        {"target": "x"},
    ],
)
def test_a_rule_that_cannot_apply_refuses_the_call(arguments: dict[str, object]):
    mapper = ToolCallMapper(rules={"t": ToolRule(resource_id_from="target.repo")})
    with pytest.raises(ToolMappingError):
        mapper.map_call(principal="p", tool="t", arguments=arguments)


def test_extra_context_and_principal_checks():
    mapper = ToolCallMapper()
    request = mapper.map_call(principal="p", tool="t", extra_context={"approval": {"id": "a"}})
    assert request.context == {"arguments": {}, "approval": {"id": "a"}}
    with pytest.raises(ToolMappingError):
        mapper.map_call(principal="p", tool="t", extra_context={"arguments": {}})
    with pytest.raises(ToolMappingError):
        mapper.map_call(principal="", tool="t")
    with pytest.raises(ValueError, match="not both"):
        ToolRule(resource_id="x", resource_id_from="y")


def test_argument_paths():
    arguments = {"a": {"b": [{"c": 1}]}}
    assert argument_at(arguments, "a.b.0.c") == 1
    with pytest.raises(ToolMappingError):
        argument_at(arguments, "a.b.1.c")
    with pytest.raises(ToolMappingError):
        argument_at(arguments, "a.b.x")
