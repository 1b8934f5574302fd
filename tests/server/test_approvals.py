"""``Approvals`` refuses combinations that cannot work, naming the option, and serves one server."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp.server.mcpserver import MCPServer

from mcp_approval.approval.options import ApprovalOptions
from mcp_approval.backends import ApprovalTemplate, LocalApprovalBackend
from mcp_approval.policy import CedarPDP
from mcp_approval.server import Approvals, StaticTokenVerifier, local_auth_settings
from mcp_approval.storage import open_database
from tests.support.store_leg import leg_store_url

pytestmark = pytest.mark.anyio
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "library"
KEY = "3q2+7wABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhs="


def approvals(tmp_path: Path, **overrides: object) -> Approvals:
    database = open_database(leg_store_url(tmp_path, "a.db"))
    arguments: dict[str, object] = {
        "database": database,
        "principals": StaticTokenVerifier({"alice-token": "alice"}),
        "auth": local_auth_settings("http://127.0.0.1:8000"),
        "options": ApprovalOptions(binding_keys={"k1": KEY}),
        **overrides,
    }
    policy = CedarPDP.from_files(EXAMPLE / "policy.cedar", EXAMPLE / "entities.json")
    templates = {"payments": ApprovalTemplate()}  # the template the example's policy names
    backend = LocalApprovalBackend(database, templates=templates, roles=lambda _principal: frozenset())
    return Approvals(policy, backend, **arguments)  # type: ignore[arg-type]


def test_a_token_verifier_needs_auth_settings(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="auth=AuthSettings"):
        approvals(tmp_path, auth=None)


def test_without_a_binding_key_it_refuses_naming_the_option(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"approval\.binding_keys: a key is required"):
        approvals(tmp_path, options=ApprovalOptions())
    assert approvals(tmp_path, options=ApprovalOptions(ephemeral_binding_key=True)) is not None


def test_the_extensions_come_in_their_required_order(tmp_path: Path) -> None:
    built = approvals(tmp_path)
    extensions = built.server_options()["extensions"]
    assert list(extensions[:2]) == [built.gate, built.tasks]
    assert built.gate.on_requestable is built.approval


async def test_one_approvals_serves_one_server(tmp_path: Path) -> None:
    built = approvals(tmp_path)
    first = MCPServer("first", **built.server_options())
    second = MCPServer("second", **built.server_options())
    for server in (first, second):  # the tools the example's policy names
        for name in ("balance", "pay"):
            server.add_tool(lambda: "ok", name=name, description=name)
    async with built.lifespan(first):
        with pytest.raises(RuntimeError, match="one Approvals serves one MCPServer"):
            async with built.lifespan(second):
                pass
