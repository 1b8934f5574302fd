"""A server built in code (``Approvals``) refuses a deployment that cannot work, as ``serve`` does:
a ``@requestable`` template its local backend lacks at ``Approvals(...)``, and a tool the policy or
its entities name but the server lacks when the server starts (before the store opens)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from mcp.server.mcpserver import MCPServer

from mcp_approval.approval.options import ApprovalOptions
from mcp_approval.backends import ApprovalTemplate, LocalApprovalBackend
from mcp_approval.config import ConfigError
from mcp_approval.policy import CedarPDP
from mcp_approval.server import Approvals, StaticTokenVerifier, local_auth_settings
from mcp_approval.storage import Database, open_database
from tests.support.store_leg import leg_store_url

pytestmark = pytest.mark.anyio
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "library"
PAYMENTS = {"payments": ApprovalTemplate(reviewer_role="approver")}


def example_copy(tmp_path: Path) -> Path:
    return Path(shutil.copytree(EXAMPLE, tmp_path / "library"))


def line_of(path: Path, needle: str) -> int:
    numbers = [n for n, text in enumerate(path.read_text().splitlines(), start=1) if needle in text]
    assert len(numbers) == 1, (needle, numbers)
    return numbers[0]


def build(
    folder: Path, database: Database, templates: dict[str, ApprovalTemplate], *, without_tasks: str = "degraded"
) -> Approvals:
    """The library example's approvals over the policy and entities in ``folder``."""
    return Approvals(
        CedarPDP.from_files(folder / "policy.cedar", folder / "entities.json"),
        LocalApprovalBackend(database, templates=templates, roles=lambda _principal: frozenset()),
        database=database,
        principals=StaticTokenVerifier({"alice-token": "alice"}),
        auth=local_auth_settings("http://127.0.0.1:8000"),
        options=ApprovalOptions(ephemeral_binding_key=True, without_tasks=without_tasks),  # type: ignore[arg-type]
    )


def server_with(approvals: Approvals, *tools: str) -> MCPServer:
    server = MCPServer("payments", **approvals.server_options())
    for name in tools:
        server.add_tool(lambda: "ok", name=name, description=name)
    return server


def test_a_requestable_template_the_backend_lacks_is_refused_at_construction(tmp_path: Path) -> None:
    folder = example_copy(tmp_path)
    database = open_database(leg_store_url(tmp_path, "a.db"))
    policy = folder / "policy.cedar"
    with pytest.raises(ConfigError) as refused:
        build(folder, database, {"refunds": ApprovalTemplate()})
    assert str(refused.value) == (
        f'{policy}:{line_of(policy, "@requestable")}: @requestable("payments"): no ApprovalTemplate named '
        "'payments' in the LocalApprovalBackend's templates to say who decides its requests (configured: refunds)"
    )


async def test_a_policy_naming_a_tool_the_server_lacks_is_refused_at_start(tmp_path: Path) -> None:
    folder = example_copy(tmp_path)
    database = open_database(leg_store_url(tmp_path, "a.db"))
    approvals = build(folder, database, PAYMENTS, without_tasks="request")
    server = server_with(approvals, "balance")  # no "pay", which the policy names
    policy = folder / "policy.cedar"
    with pytest.raises(ConfigError) as refused:
        async with approvals.lifespan(server):
            pytest.fail("the server started")
    first_pay = min(n for n, text in enumerate(policy.read_text().splitlines(), 1) if 'tool::"pay"' in text)
    assert str(refused.value) == (
        f'{policy}:{first_pay}: tool::"pay": the server has no such tool (its tools: balance)'
    )
    assert not (tmp_path / "a.db").exists() or (tmp_path / "a.db").stat().st_size == 0, "the store was not opened"


async def test_an_entity_naming_a_tool_the_server_lacks_is_refused_at_start(tmp_path: Path) -> None:
    folder = example_copy(tmp_path)
    entities = folder / "entities.json"
    listed = json.loads(entities.read_text())
    listed.append({"uid": {"type": "tool", "id": "payroll"}, "attrs": {}, "parents": []})
    entities.write_text("[\n" + ",\n".join(json.dumps(entity) for entity in listed) + "\n]\n")
    database = open_database(leg_store_url(tmp_path, "a.db"))
    approvals = build(folder, database, PAYMENTS)
    with pytest.raises(ConfigError) as refused:
        async with approvals.lifespan(server_with(approvals, "balance", "pay")):
            pytest.fail("the server started")
    assert str(refused.value) == (
        f'{entities}:{line_of(entities, "payroll")}: tool::"payroll": '
        "the server has no such tool (its tools: balance, pay)"
    )


async def test_the_http_app_does_not_start_with_a_tool_the_server_lacks(tmp_path: Path) -> None:
    folder = example_copy(tmp_path)
    approvals = build(folder, open_database(leg_store_url(tmp_path, "a.db")), PAYMENTS)
    server = server_with(approvals, "balance")
    app = approvals.http_app(server)
    with pytest.raises(ConfigError, match=r'tool::"pay": the server has no such tool'):
        async with app.router.lifespan_context(app):
            pytest.fail("the app started")


async def test_the_example_policy_with_its_tools_and_templates_starts(tmp_path: Path) -> None:
    folder = example_copy(tmp_path)
    approvals = build(folder, open_database(leg_store_url(tmp_path, "a.db")), PAYMENTS, without_tasks="request")
    async with approvals.lifespan(server_with(approvals, "balance", "pay")):
        pass
