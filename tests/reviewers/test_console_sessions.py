"""The console's session table: expiry, capacity and CSRF comparison."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mcp_approval.backends.local.schema import LOCAL_BACKEND_MIGRATIONS
from mcp_approval.clock import ManualClock
from mcp_approval.reviewers.session_table import SqlSessionTable
from mcp_approval.reviewers.sessions import SessionStore, SessionTable
from mcp_approval.storage import migrate, open_database
from tests.support.store_leg import leg_store_url

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["memory", "database"])
async def table(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionTable | None]:
    """The default in-memory table, or the store's ``console_sessions`` table."""
    if request.param == "memory":
        yield None
        return
    database = open_database(leg_store_url(tmp_path, "sessions.db"))
    await migrate(database, LOCAL_BACKEND_MIGRATIONS)
    try:
        yield SqlSessionTable(database)
    finally:
        await database.close()


async def test_a_session_ends_after_its_maximum_age_however_busy(table: SessionTable | None) -> None:
    clock = ManualClock()
    store = SessionStore(clock, idle_s=60, max_age_s=300, table=table)
    cookie, session = await store.create("bob", "bob-token")
    for _ in range(4):
        clock.advance(59_000)
        found = await store.get(cookie)
        assert found is not None
        assert (found.principal, found.token, found.csrf) == ("bob", "bob-token", session.csrf)
    clock.advance(65_000)
    assert await store.get(cookie) is None
    assert await store.count() == 0


async def test_a_full_table_drops_the_least_recently_used_session(table: SessionTable | None) -> None:
    clock = ManualClock()
    store = SessionStore(clock, capacity=2, table=table)
    first, _ = await store.create("a", "a-token")
    clock.advance(1)
    second, _ = await store.create("b", "b-token")
    clock.advance(1)
    assert await store.get(first) is not None  # now the second one is the least recently used
    third, _ = await store.create("c", "c-token")
    assert await store.count() == 2
    assert await store.get(second) is None
    assert await store.get(first) is not None
    assert await store.get(third) is not None


async def test_cookies_are_random_and_csrf_tokens_compare_exactly(table: SessionTable | None) -> None:
    store = SessionStore(ManualClock(), table=table)
    cookie, session = await store.create("bob", "bob-token")
    other, _ = await store.create("bob", "bob-token")
    assert cookie != other
    assert "bob" not in cookie
    assert session.csrf_matches(session.csrf)
    for wrong in (None, "", session.csrf[:-1], session.csrf + "x"):
        assert not session.csrf_matches(wrong)
    assert await store.get("") is None
    assert await store.get("no-such-cookie") is None


@pytest.mark.parametrize("bad", [{"idle_s": 0}, {"max_age_s": -1}, {"capacity": 0}])
def test_impossible_settings_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        SessionStore(ManualClock(), **bad)  # type: ignore[arg-type]


async def test_flashes_reach_the_next_read_once(table: SessionTable | None) -> None:
    store = SessionStore(ManualClock(), table=table)
    cookie, session = await store.create("bob", "bob-token")
    await store.flash(session, "ok", "Approved.")
    first = await store.get(cookie)
    assert first is not None
    assert first.take_flashes() == [("ok", "Approved.")]
    second = await store.get(cookie)
    assert second is not None
    assert second.flashes == []


async def test_the_stored_row_holds_neither_the_cookie_nor_the_token(tmp_path: Path) -> None:
    database = open_database(leg_store_url(tmp_path, "sessions.db"))
    await migrate(database, LOCAL_BACKEND_MIGRATIONS)
    try:
        store = SessionStore(ManualClock(), table=SqlSessionTable(database))
        cookie, _session = await store.create("bob", "bob-secret-token")
        dump = _database_bytes(tmp_path)
        assert cookie.encode() not in dump
        assert b"bob-secret-token" not in dump
        assert (await store.get(cookie)) is not None
    finally:
        await database.close()


def _database_bytes(directory: Path) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(directory.glob("sessions.db*")))
