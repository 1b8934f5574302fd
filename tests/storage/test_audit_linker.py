"""Linking the audit chain off the request path: writers never wait for the head row, linkers in
several processes extend one chain, a linker that dies or rolls back loses nothing, and chain
order follows commits, not ``event_id``."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, select

from mcp_approval.storage import AuditLog, Database
from mcp_approval.storage.audit_chain import audit_events_table, link_batch
from mcp_approval.storage.audit_linker import AuditLinker
from tests.support.audit import on_audit_store as _with_database
from tests.support.polling import eventually
from tests.support.timing import scaled

_A = audit_events_table
ROOT = Path(__file__).resolve().parents[2]


def _rows(conn: Connection) -> list[tuple[int, int | None, str | None]]:
    return [(row[0], row[1], row[2]) for row in conn.execute(select(_A.c.event_id, _A.c.seq, _A.c.subject))]


def _asyncpg_url(url: str) -> str:
    return url.replace("postgresql://", "postgres://")


def test_a_recorded_event_waits_unlinked_until_a_reader_links_it(db_url: str) -> None:
    async def run(database: Database) -> None:
        log = AuditLog(database)
        await log.record("one", subject="s1")
        await log.record("two", subject="s2")
        assert [seq for _, seq, _ in await database.read(_rows)] == [None, None]
        assert await log.head() != (0, "0" * 64)  # the head links first
        assert sorted(seq or 0 for _, seq, _ in await database.read(_rows)) == [1, 2]
        assert await log.link() == 0
        found = await log.verify()
        assert (found.ok, found.checked) == (True, 2)

    _with_database(db_url, run)


def test_a_linking_transaction_that_rolls_back_loses_nothing(db_url: str) -> None:
    class Interrupted(Exception):
        pass

    def link_then_fail(conn: Connection) -> None:
        assert link_batch(conn) == 7
        raise Interrupted

    async def run(database: Database) -> None:
        log = AuditLog(database)
        for n in range(7):
            await log.record("event", subject=f"s{n}")
        with pytest.raises(Interrupted):
            await database.write(link_then_fail)
        assert [seq for _, seq, _ in await database.read(_rows)] == [None] * 7
        assert await log.head() == (7, (await log.events())[-1].hash)
        found = await log.verify()
        assert (found.ok, found.checked) == (True, 7)

    _with_database(db_url, run)


def test_a_linker_killed_inside_its_transaction_loses_nothing(db_url: str) -> None:
    """A process links a batch and is killed before it commits: the events stay for the next linker."""

    async def seed(database: Database) -> None:
        log = AuditLog(database)
        for n in range(12):
            await log.record("event", subject=f"s{n}")

    _with_database(db_url, seed)
    child = _spawn("hang", db_url)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "linked 12"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=scaled(30))

    async def check(database: Database) -> None:
        assert [seq for _, seq, _ in await database.read(_rows)] == [None] * 12
        found = await AuditLog(database).verify()
        assert (found.ok, found.checked, found.head_seq) == (True, 12, 12)
        assert sorted(seq or 0 for _, seq, _ in await database.read(_rows)) == list(range(1, 13))

    _with_database(db_url, check)


def _spawn(*arguments: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "tests.storage.audit_process", *arguments]
    return subprocess.Popen(command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=os.environ)


#: Rounds each writer process records (five events per round, and a rolled-back one every fifth).
ROUNDS = 25
WRITERS = 3


def test_writers_and_linkers_in_several_processes_extend_one_chain(db_url: str) -> None:
    """Each process records and links at once; every committed event is linked exactly once, and
    every execution after the approval its transaction saw (verify's rules hold in chain order)."""
    _with_database(db_url, lambda database: asyncio.sleep(0))  # migrated before the writers start
    children = [_spawn("write", db_url, f"w{n}", str(ROUNDS)) for n in range(WRITERS)]
    try:
        for child in children:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "ready"
        for child in children:  # all at once
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        for child in children:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "done"
            assert child.wait(timeout=scaled(120)) == 0
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait(timeout=scaled(30))

    async def check(database: Database) -> tuple[Any, list[tuple[int, int | None, str | None]]]:
        found = await AuditLog(database).verify()
        return found, await database.read(_rows)

    found, rows = _with_database(db_url, check)
    expected = WRITERS * ROUNDS * 5
    assert (found.ok, found.broken, found.checked) == (True, None, expected)
    assert sorted(seq or 0 for _, seq, _ in rows) == list(range(1, expected + 1))
    subjects = [subject or "" for _, _, subject in rows]
    assert not [subject for subject in subjects if "refused" in subject]
    assert len(set(subjects)) == WRITERS * ROUNDS * 3  # a request, its task, a pair


@pytest.mark.postgres
def test_an_audited_write_commits_while_another_connection_holds_the_head_row(postgres_url: str) -> None:
    """The head row's lock is the linkers' alone: a request's transaction never waits for it."""
    import asyncpg

    async def run(database: Database) -> None:
        log = AuditLog(database)
        holder = await asyncpg.connect(_asyncpg_url(postgres_url))
        try:
            async with holder.transaction():
                await holder.execute("SELECT seq FROM audit_chain_head WHERE id = 1 FOR UPDATE")
                await asyncio.wait_for(log.record("while.locked", subject="s1"), 20)

                def two(conn: Connection) -> None:
                    log.record_in(conn, 1, "pair.first", subject="s2")
                    log.record_in(conn, 1, "pair.second", subject="s2")

                await asyncio.wait_for(database.write(two), 20)
                committed = await holder.fetch("SELECT event_id, seq FROM audit_events ORDER BY event_id")
                assert [row["seq"] for row in committed] == [None, None, None]
            found = await log.verify()
            assert (found.ok, found.checked) == (True, 3)
        finally:
            await holder.close()

    _with_database(postgres_url, run)


@pytest.mark.postgres
def test_a_background_linker_leaves_the_batch_to_the_linker_at_work_and_a_reader_waits(postgres_url: str) -> None:
    """Two workers' linkers never queue on the head row; a reader still sees every event linked."""
    import asyncpg

    async def run(database: Database) -> None:
        log = AuditLog(database)
        await log.record("before.hold", subject="s1")
        holder = await asyncpg.connect(_asyncpg_url(postgres_url))
        try:
            transaction = holder.transaction()
            await transaction.start()
            await holder.execute("SELECT seq FROM audit_chain_head WHERE id = 1 FOR UPDATE")
            assert await asyncio.wait_for(log.link(background=True), scaled(5)) == 0  # no wait: another links
            reader = asyncio.ensure_future(log.head())
            done, _ = await asyncio.wait({reader}, timeout=0.5)
            assert not done  # a reader waits for the head row
            await transaction.rollback()
            assert (await asyncio.wait_for(reader, scaled(20)))[0] == 1
        finally:
            await holder.close()

    _with_database(postgres_url, run)


@pytest.mark.postgres
def test_chain_order_is_commit_order_when_an_earlier_event_commits_late(postgres_url: str) -> None:
    """A long transaction's event has the smaller ``event_id`` but commits last: it is linked
    after the event committed before it, and verify reads the chain in that order."""
    import asyncpg

    async def run(database: Database) -> None:
        log = AuditLog(database)
        late = await asyncpg.connect(_asyncpg_url(postgres_url))
        try:
            async with late.transaction():
                late_id = await late.fetchval(
                    "INSERT INTO audit_events (at, kind, subject, actor, data_json) "
                    "VALUES (1, 'late', 'slow', NULL, '{}') RETURNING event_id"
                )
                await log.record("early", subject="fast")
                assert await log.link() == 1
        finally:
            await late.close()
        assert await log.link() == 1
        chained = [(event.seq, event.kind, event.event_id) async for event in log.export()]
        assert chained[1] == (2, "late", late_id)
        assert chained[0][:2] == (1, "early")
        assert chained[0][2] > late_id
        found = await log.verify()
        assert (found.ok, found.checked) == (True, 2)

    _with_database(postgres_url, run)


def test_the_background_linker_links_soon_after_a_write_and_once_more_when_stopped(db_url: str) -> None:
    async def run(database: Database) -> None:
        log = AuditLog(database)
        linker = AuditLinker(log, interval_s=3600, settle_s=0)
        await linker.start()
        try:
            await log.record("woken", subject="s1")
            # Linked by the wake-up: the interval is an hour.
            await eventually(lambda: database.read(_rows), lambda rows: rows[0][1] == 1)
            unwatch = linker._unwatch
            assert unwatch is not None
            unwatch()  # no more wake-ups: only stopping links what follows
            await log.record("before.stop", subject="s2")
            assert [seq for _, seq, _ in await database.read(_rows)] == [1, None]
        finally:
            await linker.stop()
        assert [seq for _, seq, _ in await database.read(_rows)] == [1, 2]
        await database.write(lambda conn: log.record_in(conn, 1, "after.stop", subject="s3"))
        assert [seq for _, seq, _ in await database.read(_rows)] == [1, 2, None]

    _with_database(db_url, run)
