"""The reference ARS's durable callback outbox, over real HTTP on 127.0.0.1 and a real store.

A callback is owed in the transaction that ends its task (approved, denied, cancelled, expired);
it reaches an endpoint that was down once it comes up, survives a SIGKILL of the ARS, and two
workers on one store send each row once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_approval.backends.callbacks import verify_callback
from mcp_approval.backends.local.schema import LOCAL_BACKEND_MIGRATIONS
from mcp_approval.clock import SystemClock
from mcp_approval.hosts import unused_loopback_port
from mcp_approval.reference.ars_outbox import CallbackOutbox, CallbackRow, callback_rows, queue_callback
from mcp_approval.reference.ars_schema import ARS_MIGRATIONS
from mcp_approval.reference.ars_store import ArapStore, ArsTaskRecord
from mcp_approval.storage import AUDIT_MIGRATIONS, SHARED_MIGRATIONS, migrate, open_database
from tests.reference.arap_support import (
    CLIENT_TOKEN,
    ArapProcess,
    Harness,
    arap_dir,
    running_arap,
    submission,
    transfer,
)
from tests.support.polling import eventually
from tests.support.timing import scaled

SECRET = "treasury-dev-callback-secret-0001"


@dataclass
class Receiver:
    """A PEP's callback endpoint on 127.0.0.1:``port``: records every POST, answers ``status``."""

    port: int = field(default_factory=unused_loopback_port)
    status: int = 202
    hold: threading.Event | None = None  # once given, each POST is answered only when it is set
    received: list[tuple[dict[str, Any], bytes, str | None]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/approvals/callback"

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @contextmanager
    def up(self) -> Iterator[Receiver]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", "0")))
                receiver.received.append((json.loads(raw), raw, self.headers.get("x-approval-signature")))
                if receiver.hold is not None:
                    receiver.hold.wait(scaled(30))
                self.send_response(receiver.status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

        class Server(ThreadingHTTPServer):
            request_queue_size = 128  # a worker attempts a batch of callbacks at once

        server = Server(("127.0.0.1", self.port), Handler)
        thread = threading.Thread(target=server.serve_forever, name=f"callback-receiver-{self.port}")
        thread.start()
        try:
            yield self
        finally:
            server.shutdown()
            server.server_close()
            thread.join(scaled(10))

    def statuses(self) -> list[tuple[str, str]]:
        return [(body["task"]["id"], body["task"]["status"]) for body, _, _ in self.received]


async def read_rows(store_url: str) -> list[CallbackRow]:
    database = open_database(store_url)
    try:
        return await callback_rows(database)
    finally:
        await database.close()


def rows(store_url: str) -> list[CallbackRow]:
    return asyncio.run(read_rows(store_url))


def wait_for_rows(store_url: str, accept: Callable[[list[CallbackRow]], bool]) -> None:
    asyncio.run(eventually(lambda: read_rows(store_url), accept, timeout_s=scaled(30), every_s=0.05))


def wait_for_received(receiver: Receiver, count: int) -> None:
    async def received() -> int:
        return len(receiver.received)

    asyncio.run(eventually(received, lambda seen: seen >= count, timeout_s=scaled(30), every_s=0.02))


def submit_with_callback(
    h: Harness, receiver: Receiver, amount: int, key: str, state: str = "pep-state"
) -> dict[str, Any]:
    request = transfer(amount)
    body = submission(request, h.evaluate(request), callback={"endpoint": receiver.url, "state": state})
    response = h.submit(body, key=key)
    assert response.status_code == 202, response.text
    return dict(response.json()["task"])


def ars_dir(tmp_path: Path, receiver: Receiver, **arap: Any) -> Path:
    return arap_dir(tmp_path, {"arap": {"callback_allowlist": [receiver.origin], **arap}})


def store_of(h: Harness) -> str:
    assert h.server is not None
    return h.server.config.store_url()


# -- delivery after an outage and after a restart -----------------------------------------------


def test_a_callback_to_an_endpoint_that_is_down_is_delivered_once_it_comes_up(tmp_path: Path) -> None:
    receiver = Receiver()
    with running_arap(ars_dir(tmp_path, receiver)) as h:
        task = submit_with_callback(h, receiver, 80_100, "down-then-up", state="s-1")
        h.approve_only_pending()
        # Down for three attempts (the in-memory sender of old gave up after four, within 11 s).
        wait_for_rows(store_of(h), lambda found: len(found) == 1 and found[0].attempts >= 3)
        (row,) = rows(store_of(h))
        assert (row.delivered_at, row.abandoned_at) == (None, None)
        assert row.next_attempt_at is not None
        assert row.last_error
        with receiver.up():
            wait_for_received(receiver, 1)
            wait_for_rows(store_of(h), lambda found: found[0].delivered_at is not None)
    ((body, raw, signature),) = receiver.received
    assert body == {
        "state": "s-1",
        "task": {"id": task["id"], "status": "approved", "status_endpoint": task["status_endpoint"]},
    }
    assert verify_callback(SECRET, raw, signature, int(time.time()))
    (row,) = rows(store_of(h))
    assert row.attempts >= 4
    assert (row.next_attempt_at, row.abandoned_at) == (None, None)


def test_a_callback_owed_when_the_ars_is_killed_is_delivered_after_its_restart(tmp_path: Path) -> None:
    receiver = Receiver()
    directory = ars_dir(tmp_path, receiver)
    store_url = f"sqlite:///{tmp_path / 'ars.db'}"
    server = ArapProcess(directory / "arap-server.toml", tmp_path, db_url=store_url).start()
    try:
        with httpx.Client(base_url=server.base_url, timeout=scaled(15)) as http:
            task = submit_with_callback(Harness(server.base_url, http), receiver, 80_101, "killed", state="s-2")
            Harness(server.base_url, http).approve_only_pending()
        wait_for_rows(store_url, lambda found: len(found) == 1 and found[0].attempts >= 1)
        server.kill()  # SIGKILL: nothing in memory survives
        with receiver.up():
            server = ArapProcess(directory / "arap-server.toml", tmp_path, db_url=store_url, port=server.port).start()
            wait_for_received(receiver, 1)
            # The row is marked after the receiver's answer: wait for it before the server goes.
            wait_for_rows(store_url, lambda found: found[0].delivered_at is not None)
    finally:
        server.kill()
    ((body, _, _),) = receiver.received
    assert body == {
        "state": "s-2",
        "task": {"id": task["id"], "status": "approved", "status_endpoint": task["status_endpoint"]},
    }
    assert rows(store_url)[0].delivered_at is not None


# -- every end owes a callback ------------------------------------------------------------------


def test_a_cancelled_task_calls_back_with_its_status(tmp_path: Path) -> None:
    receiver = Receiver()
    with receiver.up(), running_arap(ars_dir(tmp_path, receiver)) as h:
        task = submit_with_callback(h, receiver, 80_102, "cancelled")
        cancelled = h.http.post(task["links"]["cancel"], headers={"Authorization": f"Bearer {CLIENT_TOKEN}"})
        assert cancelled.status_code == 200, cancelled.text
        wait_for_received(receiver, 1)
    assert receiver.statuses() == [(task["id"], "cancelled")]


def test_an_expired_task_calls_back_with_its_status_without_anyone_reading_it(tmp_path: Path) -> None:
    receiver = Receiver()
    with receiver.up(), running_arap(ars_dir(tmp_path, receiver, task_lifetime_s=1.0, sweep_interval_s=0.2)) as h:
        task = submit_with_callback(h, receiver, 80_103, "expired")
        wait_for_received(receiver, 1)  # the sweep expires it
        assert h.status(task["status_endpoint"]).json()["task"]["status"] == "expired"
    assert receiver.statuses() == [(task["id"], "expired")]


def test_a_denied_task_calls_back_with_its_status(tmp_path: Path) -> None:
    receiver = Receiver()
    with receiver.up(), running_arap(ars_dir(tmp_path, receiver)) as h:
        task = submit_with_callback(h, receiver, 80_104, "denied")
        (request_id,) = h.pending_ids()
        assert h.decide(request_id, "carol", "deny").status_code == 200
        wait_for_received(receiver, 1)
    assert receiver.statuses() == [(task["id"], "denied")]


# -- the outbox itself, on SQLite and PostgreSQL ------------------------------------------------


async def _owe_callbacks(store_url: str, receiver: Receiver, count: int) -> None:
    """``count`` tasks that ended approved, each owing a callback to ``receiver``."""
    database = open_database(store_url)
    now = SystemClock().now_ms()
    try:
        await migrate(database, AUDIT_MIGRATIONS, SHARED_MIGRATIONS, LOCAL_BACKEND_MIGRATIONS, ARS_MIGRATIONS)
        store = ArapStore(database)
        for index in range(count):
            task = ArsTaskRecord(
                f"arq_{index:03d}", "treasury-mcp", None, "0" * 64, f"apr_{index:03d}", "0" * 64, ["arguments"],
                None, receiver.url, f"state-{index}", 1, 2, 3,
            )  # fmt: skip
            await store.insert_task(task, None, 1)
            await database.write(lambda conn, index=index: queue_callback(conn, f"apr_{index:03d}", "approved", now))
    finally:
        await database.close()


def _outbox(database: Any, **options: Any) -> CallbackOutbox:
    return CallbackOutbox(
        database,
        secret=SECRET,
        requests_endpoint="http://127.0.0.1:1/access/v1/requests",
        clock=SystemClock(),
        **options,
    )


@pytest.mark.anyio
async def test_two_workers_on_one_store_deliver_each_callback_once(db_url: str) -> None:
    receiver = Receiver()
    await _owe_callbacks(db_url, receiver, 30)
    first_db, second_db = open_database(db_url), open_database(db_url)
    first, second = _outbox(first_db), _outbox(second_db)
    try:
        with receiver.up():
            delivered = 0

            async def round_together() -> int:
                nonlocal delivered
                delivered += sum(await asyncio.gather(first.deliver_due(), second.deliver_due()))
                return delivered

            await eventually(round_together, lambda total: total >= 30)
    finally:
        await first.stop()
        await second.stop()
        await first_db.close()
        await second_db.close()
    per_task = Counter(task_id for task_id, _ in receiver.statuses())
    assert len(per_task) == 30
    assert set(per_task.values()) == {1}
    assert delivered == 30


@pytest.mark.anyio
async def test_a_callback_refused_every_time_is_abandoned_after_its_attempts(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    receiver = Receiver(status=503)
    await _owe_callbacks(db_url, receiver, 1)
    database = open_database(db_url)
    outbox = _outbox(database, backoff_s=0.01, max_attempts=3)
    try:
        with receiver.up(), caplog.at_level(logging.WARNING, "mcp_approval.reference"):

            async def attempt() -> list[CallbackRow]:
                await outbox.deliver_due()
                return await callback_rows(database)

            (row,) = await eventually(attempt, lambda found: found[0].next_attempt_at is None)
    finally:
        await outbox.stop()
        await database.close()
    assert len(receiver.received) == 3
    assert row.attempts == 3
    assert row.abandoned_at is not None
    assert row.delivered_at is None
    assert row.last_error == "answered 503"
    assert "gave up on the callback of task arq_000" in caplog.text


@pytest.mark.anyio
async def test_a_callback_being_sent_when_the_outbox_stops_is_delivered_and_recorded(db_url: str) -> None:
    """A stop lets the attempt in flight finish (a grace) rather than cutting it off mid-POST."""
    receiver = Receiver(hold=threading.Event())
    await _owe_callbacks(db_url, receiver, 1)
    database = open_database(db_url)
    outbox = _outbox(database)
    try:
        with receiver.up():
            await outbox.start()

            async def received() -> int:
                return len(receiver.received)

            await eventually(received, lambda seen: seen == 1)  # the POST is waiting for its answer
            stopping = asyncio.create_task(outbox.stop())
            await asyncio.sleep(0)  # one turn: the stop has begun
            assert receiver.hold is not None
            receiver.hold.set()
            await stopping
        (row,) = await callback_rows(database)
    finally:
        await outbox.stop()
        await database.close()
    assert row.delivered_at is not None
    assert row.attempts == 1
    assert len(receiver.received) == 1
