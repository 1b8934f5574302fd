"""A store that is up but will not take another connection: the call is answered "busy, try again", never
"store unavailable", and the retry after it runs normally.

The serve process connects to PostgreSQL as a role of its own. The test sets that role's connection limit
to zero and ends the server's connections: the server's next operation must open a new one, and
PostgreSQL refuses it as it refuses a client over ``max_connections`` (SQLSTATE 53300, "too many
connections"), which is what a thousand calls on a loaded machine met. Lifting the limit lets the
same call through.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg
import httpx
import pytest

from mcp_approval.protocol import INTERNAL_ERROR
from mcp_approval.storage import BUSY_RETRY_AFTER_S
from tests.support.polling import eventually
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, deployment_dir, principals
from tests.treasury.helpers import approval_for, assert_approved_executed, settled

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]


@asynccontextmanager
async def own_role(postgres_url: str) -> AsyncIterator[tuple[str, asyncpg.Connection]]:
    """A login role that may create tables in ``postgres_url``'s database; yields its URL and an admin connection."""
    role = f"mcpa_busy_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(postgres_url, timeout=scaled(10))
    try:
        await admin.execute(f'CREATE ROLE "{role}" LOGIN')
        await admin.execute(f'GRANT ALL ON SCHEMA public TO "{role}"')
        server, database = postgres_url.rsplit("/", 1)
        yield f"postgresql://{role}@{server.rsplit('@', 1)[1]}/{database}", admin
    finally:
        await admin.execute(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'")
        await admin.execute(f'DROP OWNED BY "{role}"')
        await admin.execute(f'DROP ROLE "{role}"')
        await admin.close()


async def refuse_new_connections(admin: asyncpg.Connection, role_url: str, *, refuse: bool) -> None:
    """Set the server's role to take no connection at all (its open ones ended), or lift the limit."""
    role = role_url.split("//", 1)[1].split("@", 1)[0]
    await admin.execute(f'ALTER ROLE "{role}" CONNECTION LIMIT {0 if refuse else -1}')
    if refuse:
        sessions = f"SELECT count(*) FROM pg_stat_activity WHERE usename = '{role}'"
        await admin.execute(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'")
        await eventually(lambda: admin.fetchval(sessions), lambda count: count == 0)  # every backend has exited


async def test_a_store_that_takes_no_more_connections_answers_busy_and_the_retry_runs(
    tmp_path: Path, postgres_url: str
) -> None:
    async with own_role(postgres_url) as (role_url, admin):
        server = TreasuryServer(deployment_dir(tmp_path), db_url=role_url).start()
        try:
            async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(20)) as http:
                alice, carol = principals(http)["alice"], Reviewer(http, "carol-token")
                first = await alice.call_tool("wire_transfer", {"to": "acct-before", "amount": 30_000})
                assert first.result["status"] == "working"

                await refuse_new_connections(admin, role_url, refuse=True)
                # A request that reads no store: the server has seen its pooled connections close meanwhile.
                assert (await alice.request("tools/list", {})).status == 200
                refused = await alice.call_tool("wire_transfer", {"to": "acct-busy", "amount": 30_000})
                assert refused.error == {
                    "code": INTERNAL_ERROR,
                    "message": f"Approval store busy; try again in {BUSY_RETRY_AFTER_S} s",
                    "data": {"retryAfterMs": BUSY_RETRY_AFTER_S * 1000},
                }

                await refuse_new_connections(admin, role_url, refuse=False)
                retried = await alice.call_tool("wire_transfer", {"to": "acct-busy", "amount": 30_000})
                approval = await approval_for(carol, "wire_transfer", to="acct-busy")
                assert (await carol.decide(approval["id"], "approve")).status_code == 200
                assert_approved_executed(await settled(alice, retried.result["taskId"]))
            assert [entry["to"] for entry in server.ledger()] == ["acct-busy"]
        finally:
            server.kill()
