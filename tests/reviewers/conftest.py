"""Fixtures: the reviewer console over a local backend, served by uvicorn on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette

from mcp_approval.backends import ApprovalTemplate, LocalApprovalBackend, RequestSeal
from mcp_approval.backends.contract import ApprovalSubmission
from mcp_approval.backends.local.schema import LOCAL_BACKEND_MIGRATIONS
from mcp_approval.clock import ManualClock
from mcp_approval.reviewers.console import console_routes
from mcp_approval.storage import AUDIT_MIGRATIONS, AuditLog, migrate, open_database
from tests.support.polling import eventually
from tests.support.store_leg import leg_store_url
from tests.support.timing import scaled

ROLES = {
    "alice": frozenset({"approver", "treasurer"}),
    "bob": frozenset({"approver"}),
    "carol": frozenset({"approver"}),
    "mallory": frozenset[str](),
}
#: A template named like markup, configured so that the escaping test can submit under it.
HOSTILE_TEMPLATE = "</textarea><svg onload=alert(2)>"
TEMPLATES = {
    "single": ApprovalTemplate(),
    "pair": ApprovalTemplate(approvals_required=2),
    HOSTILE_TEMPLATE: ApprovalTemplate(),
}
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@dataclass
class Console:
    """A running console: its URL, the backend and audit log behind it, the clock, the live tokens."""

    base_url: str
    backend: LocalApprovalBackend
    audit: AuditLog
    clock: ManualClock
    tokens: dict[str, str] = field(default_factory=dict)
    _keys: int = 0

    async def submit(self, **fields: object) -> str:
        """Open a request (alice asks for a transfer unless ``fields`` say otherwise)."""
        body: dict[str, object] = {
            "tool": "wire_transfer",
            "arguments": {"to": "acct-1", "amount": 50_000, "secret": "s3cr3t-value"},
            "requester": "alice",
            "template": "single",
            "title": "Large wire transfer",
            "deadline_ms": self.clock.now_ms() + 86_400_000,
        }
        body.update(fields)
        self._keys += 1
        return await self.backend.submit(f"key-{self._keys:04d}-" + "k" * 40, ApprovalSubmission(**body))  # type: ignore[arg-type]


@pytest.fixture
async def console(tmp_path: Path) -> AsyncIterator[Console]:
    """The console on a fresh SQLite database, with a manual clock."""
    async with serve_console(tmp_path) as running:
        yield running


@contextlib.asynccontextmanager
async def serve_console(
    tmp_path: Path, *, seal: RequestSeal | None = None, templates: Mapping[str, ApprovalTemplate] | None = None
) -> AsyncIterator[Console]:
    """The console on a fresh database (SQLite, or PostgreSQL on the store leg), served on 127.0.0.1;
    ``seal`` lets reviewers write similar-call rules."""
    database = open_database(leg_store_url(tmp_path, "console.db"))
    await migrate(database, AUDIT_MIGRATIONS, LOCAL_BACKEND_MIGRATIONS)
    clock = ManualClock()
    audit = AuditLog(database, clock)
    backend = LocalApprovalBackend(
        database,
        templates=TEMPLATES if templates is None else templates,
        roles=lambda p: ROLES.get(p, frozenset()),
        redact=("secret",),
        audit=audit,
        clock=clock,
        seal=seal,
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


async def _ready(server: uvicorn.Server, serving: asyncio.Task[None]) -> bool:
    if serving.done():
        serving.result()  # surfaces a startup failure
    return server.started


@pytest.fixture
async def http(console: Console) -> AsyncIterator[httpx.AsyncClient]:
    """A browser-like client of the console (keeps cookies, does not follow redirects)."""
    async with httpx.AsyncClient(base_url=console.base_url, timeout=scaled(20)) as client:
        yield client


async def sign_in(http: httpx.AsyncClient, name: str) -> str:
    """Sign ``name`` in and return the session's CSRF token."""
    response = await http.post("/console/login", data={"token": f"{name}-token-0123"})
    assert response.status_code == 303, response.text
    page = await http.get("/console")
    assert page.status_code == 200
    match = CSRF.search(page.text)
    assert match is not None
    return match.group(1)
