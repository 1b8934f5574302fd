"""The console's delegations page over real HTTP: a reviewer delegates their role for a template,
the delegate decides in the console and the request's page names both, the delegator revokes it,
and a refused delegation says which rule refused it."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette

from mcp_approval.backends import LocalApprovalBackend
from mcp_approval.backends.local.schema import LOCAL_BACKEND_MIGRATIONS
from mcp_approval.clock import ManualClock
from mcp_approval.keyring import BindingCipher
from mcp_approval.reviewers.console import console_routes
from mcp_approval.storage import AUDIT_MIGRATIONS, AuditLog, migrate, open_database
from tests.reviewers.conftest import ROLES, TEMPLATES, Console, _ready, sign_in
from tests.support.polling import eventually
from tests.support.store_leg import leg_store_url
from tests.support.timing import scaled

pytestmark = pytest.mark.anyio


@pytest.fixture
async def sealed_console(tmp_path: Path) -> AsyncIterator[Console]:
    """The console over a backend holding the binding key (delegations are sealed under it)."""
    database = open_database(leg_store_url(tmp_path, "console.db"))
    await migrate(database, AUDIT_MIGRATIONS, LOCAL_BACKEND_MIGRATIONS)
    clock = ManualClock()
    audit = AuditLog(database, clock)
    backend = LocalApprovalBackend(
        database,
        templates=TEMPLATES,
        roles=lambda p: ROLES.get(p, frozenset()),
        audit=audit,
        clock=clock,
        seal=BindingCipher({"k1": os.urandom(32)}),
    )
    tokens = {f"{name}-token-0123": name for name in ROLES}

    async def authenticate(token: str) -> str | None:
        return tokens.get(token)

    app = Starlette(routes=console_routes(backend, authenticate, audit, clock=clock))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off"))
    serving = asyncio.create_task(server.serve())
    await eventually(lambda: _ready(server, serving), bool, timeout_s=scaled(10))
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield Console(f"http://127.0.0.1:{port}", backend, audit, clock, tokens)
    finally:
        server.should_exit = True
        await serving
        await database.close()


def client(console: Console) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=console.base_url, timeout=scaled(20))


async def test_delegate_in_the_console_and_the_decision_names_both(sealed_console: Console) -> None:
    request = await sealed_console.submit()
    async with client(sealed_console) as carol, client(sealed_console) as mallory:
        carol_csrf = await sign_in(carol, "carol")
        page = await carol.get("/console/delegations")
        assert page.status_code == 200
        assert "You have made or received no delegation." in page.text
        form = {"csrf": carol_csrf, "delegate": "mallory", "template": "single", "hours": "8"}
        made = await carol.post("/console/delegations", data=form)
        assert made.status_code == 303, made.text
        page = await carol.get("/console/delegations")
        assert "mallory decides single for you until" in page.text
        found = re.search(r'action="/console/delegations/(dlg_[0-9a-f]+)/revoke"', page.text)
        assert found is not None

        mallory_csrf = await sign_in(mallory, "mallory")
        listed = await mallory.get("/console/delegations")
        assert found.group(1) in listed.text
        assert "/revoke" not in listed.text  # only its delegator may revoke it
        pending = await mallory.get("/console")
        assert request in pending.text
        decided = await mallory.post(
            f"/console/requests/{request}/decide", data={"csrf": mallory_csrf, "decision": "approve", "comment": ""}
        )
        assert decided.status_code == 303, decided.text
        detail = await carol.get(f"/console/requests/{request}")
        assert "mallory for carol (delegated)" in detail.text

        revoked = await carol.post(f"/console/delegations/{found.group(1)}/revoke", data={"csrf": carol_csrf})
        assert revoked.status_code == 303, revoked.text
        page = await carol.get("/console/delegations")
        assert "Revoked: mallory no longer decides single." in page.text
        assert "revoked" in page.text
        later = await sealed_console.submit()
        assert later not in (await mallory.get("/console")).text


@pytest.mark.parametrize(
    ("who", "fields", "status", "message"),
    [
        ("carol", {"delegate": "mallory", "template": "single", "hours": "400"}, 400, "delegation_max_s"),
        ("carol", {"delegate": "mallory", "template": "single", "hours": "soon"}, 400, "a positive number"),
        ("carol", {"delegate": "", "template": "single", "hours": "1"}, 400, "Give the delegate"),
        ("mallory", {"delegate": "bob", "template": "single", "hours": "1"}, 403, "in their own right"),
    ],
)
async def test_a_refused_delegation_says_why(
    sealed_console: Console, who: str, fields: dict[str, str], status: int, message: str
) -> None:
    async with client(sealed_console) as http:
        csrf = await sign_in(http, who)
        answer = await http.post("/console/delegations", data={"csrf": csrf, **fields})
        assert answer.status_code == status, answer.text
        assert message in answer.text
        assert "You have made or received no delegation." in answer.text


async def test_a_delegation_form_without_its_token_delegates_nothing(sealed_console: Console) -> None:
    async with client(sealed_console) as http:
        await sign_in(http, "carol")
        form = {"csrf": "wrong", "delegate": "mallory", "template": "single", "hours": "1"}
        assert (await http.post("/console/delegations", data=form)).status_code == 403
    assert await sealed_console.backend.delegations() == []
