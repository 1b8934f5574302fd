"""A store outage: tasks/* fail closed with -32603, and nothing the worker holds is lost."""

from __future__ import annotations

import asyncpg
import pytest

from tests.support.polling import eventually

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]


async def set_database_reachable(admin_url: str, database: str, reachable: bool) -> None:
    conn = await asyncpg.connect(admin_url, timeout=5)
    try:
        await conn.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS {str(reachable).lower()}')
        if not reachable:
            await conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
                database,
            )
    finally:
        await conn.close()


async def test_store_down_fails_closed_and_loses_nothing(serve_inprocess, postgres_url):
    from tests.conftest import POSTGRES_ADMIN_URL

    database = postgres_url.rsplit("/", 1)[1]
    async with serve_inprocess(store_url=postgres_url, threshold_s=0.0) as (wire, tasks):
        created = (await wire.call_tool("slow_job", {"seconds": 1.0, "label": "outage"})).result
        await set_database_reachable(POSTGRES_ADMIN_URL, database, False)
        try:
            during = await wire.get(created["taskId"])
            cancel = await wire.cancel(created["taskId"])
            execution = tasks.runtime.local(created["taskId"])
            assert execution is not None
            await execution.wait(None)  # the tool finishes while the store is down
        finally:
            await set_database_reachable(POSTGRES_ADMIN_URL, database, True)
        after = (
            await eventually(
                lambda: wire.get(created["taskId"]), lambda r: r.status == 200 and r.result["status"] == "completed"
            )
        ).result
    assert during.status == 200
    assert during.error == {"code": -32603, "message": "Task store unavailable"}
    assert cancel.error["code"] == -32603
    assert after["result"]["content"][0]["text"] == "outage finished after 1.0s"
