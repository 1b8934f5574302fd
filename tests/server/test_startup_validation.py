"""``mcp-approval serve`` refuses a deployment that cannot work, in one line naming file, line and key.

Each case is a private copy of ``examples/treasury`` with one thing changed, served as a real
subprocess (the message a user sees) and built in process (the error a library user catches).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest
from mcp.server.mcpserver import MCPServer

from mcp_approval.config import ConfigError, load_config
from mcp_approval.policy.source import TextSource
from mcp_approval.server.deployment import build_deployment
from mcp_approval.server.validation import call_register, check_policy_tools, check_requestable_templates
from tests.approval.inprocess import inprocess_treasury
from tests.support.timing import scaled
from tests.support.treasury import TreasuryServer, deployment_dir
from tests.treasury.helpers import AUTHORIZATION

BASE_URL = "http://127.0.0.1:8000"


def serve_fails(directory: Path) -> str:
    """Run ``serve`` on the copy; it must exit 2 with one line on stderr and no traceback."""
    command = [sys.executable, "-m", "mcp_approval", "serve", "--config", str(directory / "config.toml"), "--port", "0"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=scaled(60), env=os.environ.copy())
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def build_fails(directory: Path) -> str:
    config = load_config(directory / "config.toml")
    with pytest.raises(ConfigError) as caught:
        build_deployment(config, store_url=f"sqlite:///{directory / 'check.db'}", base_url=BASE_URL)
    return str(caught.value)


def line_of(path: Path, needle: str) -> int:
    """The 1-based line of ``path`` that holds ``needle`` (there must be exactly one)."""
    numbers = [n for n, text in enumerate(path.read_text().splitlines(), start=1) if needle in text]
    assert len(numbers) == 1, (needle, numbers)
    return numbers[0]


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def test_a_requestable_template_that_is_not_configured_is_refused(tmp_path: Path) -> None:
    directory = deployment_dir(tmp_path)
    policy = directory / "policy.cedar"
    edit(policy, '@requestable("close_quarter")', '@requestable("quarter_close")')
    where = f'{policy}:{line_of(policy, "quarter_close")}: @requestable("quarter_close"): '
    expected = where + f"no [templates.quarter_close] in {directory / 'config.toml'}"
    assert serve_fails(directory).startswith("mcp-approval serve: " + expected)
    assert build_fails(directory).startswith(expected)


def test_a_template_removed_from_the_config_is_refused(tmp_path: Path) -> None:
    directory = deployment_dir(tmp_path)
    config = directory / "config.toml"
    # The resolver names the template too: take both out, leaving the policy's annotation behind.
    text = config.read_text()
    start, end = text.index("\n[[resolvers]]"), len(text)
    config.write_text(text[:start] + text[end:])
    edit(config, "[templates.refund]", "[templates.unused]")
    policy = directory / "policy.cedar"
    message = serve_fails(directory)
    annotation = '@requestable("refund")'
    assert f"{policy}:{line_of(policy, annotation)}: {annotation}: " in message
    assert "configured: close_quarter, treasury, unused" in message


def test_a_policy_naming_a_tool_the_server_does_not_have_is_refused(tmp_path: Path) -> None:
    directory = deployment_dir(tmp_path)
    policy = directory / "policy.cedar"
    edit(policy, 'resource == tool::"delete_account"', 'resource == tool::"close_account"')
    expected = f'{policy}:{line_of(policy, "close_account")}: tool::"close_account": the server has no such tool'
    message = serve_fails(directory)
    assert message.startswith("mcp-approval serve: " + expected)
    assert "delete_account" in message  # the tools it does have are listed
    assert build_fails(directory).startswith(expected)


def test_an_entity_naming_a_tool_the_server_does_not_have_is_refused(tmp_path: Path) -> None:
    directory = deployment_dir(tmp_path)
    entities_file = directory / "entities.json"
    entities = json.loads(entities_file.read_text())
    entities.append({"uid": {"type": "tool", "id": "payroll"}, "attrs": {}, "parents": []})
    entities_file.write_text(json.dumps(entities, indent=2))
    line = line_of(entities_file, '"payroll"') - 3  # the entity's opening brace
    assert entities_file.read_text().splitlines()[line - 1].strip() == "{"
    expected = f'{entities_file}:{line}: tool::"payroll": the server has no such tool'
    assert serve_fails(directory).startswith("mcp-approval serve: " + expected)


def test_a_group_of_tools_is_not_mistaken_for_a_tool(tmp_path: Path) -> None:
    directory = deployment_dir(tmp_path)
    entities_file = directory / "entities.json"
    entities = json.loads(entities_file.read_text())
    group = {"type": "tool", "id": "payments"}
    entities.append({"uid": group, "attrs": {}, "parents": []})
    entities.append({"uid": {"type": "tool", "id": "refund"}, "attrs": {}, "parents": [group]})
    entities_file.write_text(json.dumps(entities, indent=2))
    policy = directory / "policy.cedar"
    policy.write_text(
        policy.read_text() + '\npermit (principal == user::"erin", action, resource in tool::"payments");\n'
    )
    deployment = build_deployment(
        load_config(directory / "config.toml"), store_url=f"sqlite:///{directory / 'x.db'}", base_url=BASE_URL
    )
    assert deployment.server.name == "treasury"


def test_a_register_with_the_wrong_signature_is_refused(tmp_path: Path) -> None:
    directory = deployment_dir(tmp_path)
    tools = directory / "tools.py"
    edit(
        tools,
        "def register(server: MCPServer[Any], settings: dict[str, Any], base_dir: Path)",
        "def register(server, settings)",
    )
    expected = (
        f"{tools}:{line_of(tools, 'def register(')}: register(server, settings): "
        "must accept (server, settings, base_dir): too many positional arguments"
    )
    assert serve_fails(directory) == "mcp-approval serve: " + expected
    assert build_fails(directory) == expected


def test_an_exception_inside_register_is_one_line_naming_where_it_was_raised(tmp_path: Path) -> None:
    directory = deployment_dir(tmp_path)
    tools = directory / "tools.py"
    edit(
        tools,
        '    ledger = Ledger(base_dir / settings.get("ledger", "ledger.jsonl"))',
        '    ledger = Ledger(base_dir / settings["journal"])',
    )
    expected = f"{tools}:{line_of(tools, 'journal')}: register: raised KeyError: 'journal'"
    assert serve_fails(directory) == "mcp-approval serve: " + expected
    assert build_fails(directory) == expected


def test_the_untouched_treasury_example_starts(tmp_path: Path) -> None:
    server = TreasuryServer(deployment_dir(tmp_path)).start()
    try:
        assert server.process is not None
        assert server.process.poll() is None
    finally:
        server.kill()


def test_the_arap_server_refuses_a_requestable_template_it_does_not_configure(tmp_path: Path) -> None:
    directory = deployment_dir(tmp_path)
    policy = directory / "policy.cedar"
    edit(policy, '@requestable("treasury")', '@requestable("treasurey")')
    config = directory / "arap-server.toml"
    command = [sys.executable, "-m", "mcp_approval", "arap-server", "--config", str(config), "--port", "0"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=scaled(60), env=os.environ.copy())
    assert done.returncode == 2, done.stderr
    where = f'{policy}:{line_of(policy, "treasurey")}: @requestable("treasurey"): no [templates.treasurey] in {config}'
    configured = "(configured: close_quarter, refund, treasury)"
    assert done.stderr.strip() == f"mcp-approval arap-server: {where} to say who decides its requests {configured}"


# -- at run time, the local backend fails closed as well ------------------------------------------


@pytest.mark.anyio
async def test_a_request_for_a_template_that_is_not_configured_is_a_final_denial(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path) as harness:
        harness.pdp.gate("ledger", template="unconfigured")  # a PDP the startup checks cannot see
        reply = (await harness.alice.call_tool("ledger", {})).result
        pending = await harness.reviewer("carol").pending()
    assert reply.get("resultType") != "task"
    assert reply["isError"] is True
    assert reply["_meta"][AUTHORIZATION]["remediation"] == "unavailable"
    assert pending == []


# -- the checks on their own --------------------------------------------------------------------

TOOLS = frozenset({"ledger", "refund"})


def policy_problem(text: str, **options: Any) -> str | None:
    try:
        check_policy_tools(TextSource(text, "p.cedar"), TOOLS, **options)
    except ConfigError as exc:
        return str(exc)
    return None


def test_tools_are_found_in_scopes_conditions_and_sets() -> None:
    assert policy_problem('permit (principal, action, resource == tool::"ledger");') is None
    assert policy_problem('permit (principal, action, resource == tool::"ledgr");') == (
        'p.cedar:1: tool::"ledgr": the server has no such tool (its tools: ledger, refund)'
    )
    in_condition = 'permit (principal, action, resource)\nwhen {\n  resource in [tool::"refund", tool::"payroll"]\n};'
    assert str(policy_problem(in_condition)).startswith('p.cedar:3: tool::"payroll": ')
    grouped = 'permit (principal, action, resource in tool::"payments");'
    assert policy_problem(grouped, groups={"payments"}) is None
    assert policy_problem(grouped) is not None
    other_type = 'permit (principal, action, resource == Repo::"payroll");'
    assert policy_problem(other_type) is None
    namespaced = 'permit (principal, action, resource == Bank::tool::"payroll");'
    assert str(policy_problem(namespaced, tool_type="Bank::tool")).startswith('p.cedar:1: Bank::tool::"payroll": ')


def test_a_requestable_without_a_template_uses_the_default_and_passes() -> None:
    text = (
        '@requestable\nforbid (principal, action, resource);\n@requestable("")\nforbid (principal, action, resource);'
    )
    check_requestable_templates(TextSource(text, "p.cedar"), (), config_path=Path("c.toml"))
    named = (
        'permit (principal, action, resource);\n\n@id("big")\n@requestable("t")\nforbid (principal, action, resource);'
    )
    with pytest.raises(ConfigError) as caught:
        check_requestable_templates(TextSource(named, "p.cedar"), ("u",), config_path=Path("c.toml"))
    assert str(caught.value) == (
        'p.cedar:4: @requestable("t"): no [templates.t] in c.toml to say who decides its requests (configured: u)'
    )


def test_register_may_take_more_parameters_with_defaults() -> None:
    seen: list[Any] = []

    def register(server: Any, settings: Any, base_dir: Any, extra: int = 1, **more: Any) -> None:
        seen.append((server, settings, base_dir, extra))

    call_register(register, cast("MCPServer[Any]", "server"), {"a": 1}, Path("/d"))
    assert seen == [("server", {"a": 1}, Path("/d"), 1)]


def test_an_async_register_is_refused() -> None:
    async def register(server: Any, settings: Any, base_dir: Any) -> None:
        raise AssertionError("never awaited")

    with pytest.raises(ConfigError, match=r"test_startup_validation.py:\d+: register: must be a plain function"):
        call_register(register, cast("MCPServer[Any]", "server"), {}, Path("/d"))
