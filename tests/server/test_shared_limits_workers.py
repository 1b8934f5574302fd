"""Limits, sign-ins and callback replay protection hold across ``serve`` workers on one PostgreSQL store.

Each worker is its own ``serve`` process on its own port, as behind a load balancer; they share
nothing but the database. A sign-in on one is valid on the other, failed sign-ins on both count
against one limit, and an ARAP callback accepted by one is refused as a replay by the other.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from mcp_approval.backends.arap_wire import callback_state
from mcp_approval.backends.callbacks import CALLBACK_PATH, SIGNATURE_HEADER, sign_callback
from mcp_approval.storage import Database, open_database
from mcp_approval.web.throttle import DEFAULT_MAX_FAILURES
from tests.support.arap import arap_deployment
from tests.support.polling import eventually
from tests.support.timing import scaled
from tests.support.treasury import TreasuryServer, deployment_dir, principals

pytestmark = [pytest.mark.anyio, pytest.mark.postgres, pytest.mark.slow]

SECRET = "treasury-dev-callback-secret-0001"  # serve's (config-arap.toml)


def two_workers(directory: Path, db_url: str) -> Iterator[tuple[TreasuryServer, TreasuryServer]]:
    first = TreasuryServer(directory, db_url=db_url).start(timeout_s=scaled(90))
    second = TreasuryServer(directory, db_url=db_url)
    try:
        second.start(timeout_s=scaled(90))
        yield first, second
    finally:
        first.kill()
        second.kill()


@pytest.fixture
def workers(tmp_path: Path, postgres_url: str) -> Iterator[tuple[TreasuryServer, TreasuryServer]]:
    yield from two_workers(deployment_dir(tmp_path), postgres_url)


async def test_a_console_sign_in_on_one_worker_is_valid_on_the_other(
    workers: tuple[TreasuryServer, TreasuryServer],
) -> None:
    first, second = workers
    async with httpx.AsyncClient(base_url=first.base_url, timeout=scaled(30)) as one:
        signed_in = await one.post("/console/login", data={"token": "carol-token"})
        assert signed_in.status_code == 303, signed_in.text
        cookies = dict(one.cookies)
    async with httpx.AsyncClient(base_url=second.base_url, timeout=scaled(30), cookies=cookies) as two:
        page = await two.get("/console")
        assert page.status_code == 200, page.headers.get("location")
        assert "Nothing is waiting for a decision." in page.text
        # Signing out on the second worker ends the session for the first as well.
        csrf = page.text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        out = await two.post("/console/logout", data={"csrf": csrf}, headers={"origin": second.base_url})
        assert out.status_code == 303
    async with httpx.AsyncClient(base_url=first.base_url, timeout=scaled(30), cookies=cookies) as one:
        assert (await one.get("/console")).headers["location"] == "/console/login"


async def test_failed_sign_ins_on_both_workers_count_against_one_limit(
    workers: tuple[TreasuryServer, TreasuryServer],
) -> None:
    first, second = workers
    async with (
        httpx.AsyncClient(base_url=first.base_url, timeout=scaled(30)) as one,
        httpx.AsyncClient(base_url=second.base_url, timeout=scaled(30)) as two,
    ):
        for attempt in range(DEFAULT_MAX_FAILURES):  # half on each worker
            client = one if attempt % 2 == 0 else two
            wrong = await client.get("/approvals", headers={"authorization": f"Bearer wrong-{attempt}"})
            assert wrong.status_code == 401, wrong.text
        for client in (one, two):
            refused = await client.get("/approvals", headers={"authorization": "Bearer carol-token"})
            assert refused.status_code == 429, refused.text
            assert int(refused.headers["retry-after"]) >= 1
            login = await client.post("/console/login", data={"token": "carol-token"})
            assert login.status_code == 429


async def test_failures_on_one_worker_lock_the_client_out_of_the_other_within_the_refresh_interval(
    workers: tuple[TreasuryServer, TreasuryServer],
) -> None:
    # The second worker never sees this client fail: it learns of the lockout from the store alone.
    first, second = workers
    async with (
        httpx.AsyncClient(base_url=first.base_url, timeout=scaled(30)) as one,
        httpx.AsyncClient(base_url=second.base_url, timeout=scaled(30)) as two,
    ):
        for attempt in range(DEFAULT_MAX_FAILURES):
            wrong = await one.get("/approvals", headers={"authorization": f"Bearer wrong-{attempt}"})
            assert wrong.status_code == 401, wrong.text

        async def with_the_right_token() -> int:
            response = await two.get("/approvals", headers={"authorization": "Bearer carol-token"})
            return response.status_code

        # Bounded by DEFAULT_REFRESH_S (1 s); the polling bound only allows for a loaded machine.
        await eventually(with_the_right_token, lambda status: status == 429, timeout_s=scaled(10))


async def test_a_callback_replayed_to_another_worker_is_refused(tmp_path: Path, postgres_url: str) -> None:
    pair = arap_deployment(
        tmp_path,
        ars_overrides={"arap": {"retry_after_s": 30, "callback_secret": "an-ars-secret-serve-does-not-know"}},
    )
    pair.ars.start(timeout_s=scaled(90))
    first = TreasuryServer(pair.directory, db_url=postgres_url)
    second = TreasuryServer(pair.directory, db_url=postgres_url)
    try:
        first.start(timeout_s=scaled(90))
        async with httpx.AsyncClient(base_url=first.base_url, timeout=scaled(30)) as http:
            alice = principals(http)["alice"]
            created = await alice.call_tool("wire_transfer", {"to": "acct-w", "amount": 40_000})
        task_id = created.result["taskId"]
        database = open_database(postgres_url)
        try:
            found = await eventually(
                lambda: _handle_and_key(database, task_id), lambda found: found is not None, timeout_s=scaled(30)
            )
        finally:
            await database.close()
        assert found is not None
        handle, key = found
        second.start(timeout_s=scaled(90))  # once the task exists, so its start-up reconciliation has nothing to adopt
        body = json.dumps({"state": callback_state(SECRET, key), "task": {**handle, "status": "pending"}}).encode()
        headers = {SIGNATURE_HEADER: sign_callback(SECRET, body, int(time.time()))}
        async with httpx.AsyncClient(timeout=scaled(30)) as http:
            accepted = await http.post(first.base_url + CALLBACK_PATH, content=body, headers=headers)
            assert accepted.status_code == 202, accepted.text
            replayed = await http.post(second.base_url + CALLBACK_PATH, content=body, headers=headers)
            assert replayed.status_code == 409, replayed.text
            assert replayed.headers["content-type"].startswith("application/problem+json")
    finally:
        first.kill()
        second.kill()
        pair.kill()


async def _handle_and_key(database: Database, task_id: str) -> tuple[dict[str, str], str] | None:
    query = text(
        "SELECT w.handle, i.idempotency_key FROM approval_workflows w JOIN approval_intents i"
        " ON i.task_id = w.task_id WHERE w.task_id = :task ORDER BY i.generation DESC"
    )
    row = await database.read(lambda conn: conn.execute(query, {"task": task_id}).first())
    if row is None or not row[0]:
        return None
    return json.loads(row[0]), str(row[1])
