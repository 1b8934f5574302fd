"""The local backend shares the server's database, so an approval task is created in one transaction.

Intent, backend request, task, workflow and their audit events commit together or not at all: a
creation that fails after the backend request was written leaves no request, no intent and no task
behind (with the backend across a network, the same failure leaves a request for reconciliation
to withdraw). The crash points of this shape are in ``test_crash_points.py``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from tests.support.timing import scaled
from tests.support.treasury import TreasuryServer, deployment_dir, principals, store_rows

pytestmark = pytest.mark.anyio

ARGUMENTS = {"to": "acct-atomic", "amount": 30_000}
COUNTS = (
    "SELECT (SELECT count(*) FROM approval_requests), (SELECT count(*) FROM approval_intents),"
    " (SELECT count(*) FROM tasks), (SELECT count(*) FROM approval_workflows), (SELECT count(*) FROM audit_events)"
)
#: Fails every insert of a workflow row: the last table a creation writes, after the backend's request.
FAIL_WORKFLOWS = {
    "sqlite": [
        "CREATE TRIGGER refuse_workflows BEFORE INSERT ON approval_workflows BEGIN SELECT RAISE(ABORT, 'refused'); END"
    ],
    "postgres": [
        "CREATE FUNCTION refuse_workflows() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN RAISE EXCEPTION 'refused'; END $$",
        "CREATE TRIGGER refuse_workflows BEFORE INSERT ON approval_workflows"
        " FOR EACH ROW EXECUTE FUNCTION refuse_workflows()",
    ],
}
ALLOW_WORKFLOWS = {
    "sqlite": ["DROP TRIGGER refuse_workflows"],
    "postgres": ["DROP TRIGGER refuse_workflows ON approval_workflows", "DROP FUNCTION refuse_workflows()"],
}


def counts(store: str) -> tuple[int, ...]:
    ((*found,),) = store_rows(store, COUNTS)
    return tuple(int(value) for value in found)


def run_all(store: str, statements: list[str]) -> None:
    for statement in statements:
        store_rows(store, statement)


async def test_a_creation_failing_after_the_backend_request_leaves_nothing_behind(tmp_path: Path, db_url: str) -> None:
    directory = deployment_dir(tmp_path)
    store = db_url if db_url.startswith("postgres") else f"sqlite:///{directory / 'treasury.db'}"
    kind = "postgres" if store.startswith("postgres") else "sqlite"
    server = TreasuryServer(directory, db_url=store)
    await asyncio.to_thread(server.start)
    try:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(30)) as http:
            alice = principals(http)["alice"]
            before = counts(store)
            run_all(store, FAIL_WORKFLOWS[kind])
            failed = await alice.call_tool("wire_transfer", ARGUMENTS)
            assert "error" in failed.body or failed.result.get("isError"), failed.body
            assert counts(store) == before  # no request, intent, task, workflow or event of it
            run_all(store, ALLOW_WORKFLOWS[kind])
            created = (await alice.call_tool("wire_transfer", ARGUMENTS)).result
            assert created["status"] == "working"
            requests, intents, tasks, workflows, _events = counts(store)
            assert (requests, intents, tasks, workflows) == (before[0] + 1, before[1] + 1, before[2] + 1, before[3] + 1)
            ((state, handle),) = store_rows(store, "SELECT state, handle FROM approval_intents")
            assert state == "bound"  # never seen in flight
            assert handle is not None
    finally:
        server.kill()
