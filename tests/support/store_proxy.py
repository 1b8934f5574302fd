"""A small TCP proxy on 127.0.0.1 in front of PostgreSQL that cuts or stalls a server's database connections.

It reads just enough of the frontend half of the PostgreSQL wire protocol (the untyped startup
messages, then ``type byte + int32 length + body``) to know which statement each connection
sends: a simple query (``Q``) is one statement; in the extended protocol (asyncpg, which
SQLAlchemy's dialect drives) a statement runs at its ``Execute`` (``E``), with the text its portal
was bound (``B``) to from a parsed (``P``) statement, named and cached or not. The backend half is
forwarded as bytes.

A :class:`StoreFault` armed with :meth:`StoreProxy.arm` fires at the ``nth`` statement from then on
whose text matches ``pattern``, optionally only once a statement matching ``after`` ran before it on the
same connection (the ``COMMIT`` of the transaction that wrote a given row, say):

- ``cut``: every connection is closed on both sides; with ``answered=True`` the statement is
  forwarded first and the connections are closed when the server starts to answer it (the
  statement ran, nobody learns its outcome), else it never reaches the server. With
  ``down=True`` the proxy then refuses new connections until :meth:`StoreProxy.come_back`;
- ``stall``: that connection's statement (and what follows it) is held until :meth:`StoreProxy.release`.

:meth:`StoreProxy.go_down` makes the store "gone" at any time: live connections cut, new ones refused.
:meth:`StoreProxy.hold_new` makes it slow to connect to: a new connection is accepted but hears nothing
(its start-up is held) until :meth:`StoreProxy.admit_new`, while the connections already made go on.
Every statement is recorded (:attr:`StoreProxy.statements`), and so is every span of time the
store was unreachable (:meth:`StoreProxy.unreachable_between`).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import struct
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from tests.support.timing import scaled

__all__ = ["Statement", "StoreFault", "StoreProxy"]

T = TypeVar("T")
_SSL_REQUEST = 80877103
_GSSENC_REQUEST = 80877104
_CANCEL_REQUEST = 80877102
_HEADER = struct.Struct("!cI")


@dataclass(frozen=True)
class Statement:
    """A statement a connection sent: its position among all the proxy saw, its text, its connection."""

    number: int
    text: str
    connection: int
    at: float


@dataclass
class StoreFault:
    """Where and how to break the store (see the module docstring)."""

    kind: Literal["cut", "stall"]
    pattern: str = ""
    nth: int = 1
    after: str | None = None
    answered: bool = False
    down: bool = True
    #: Set once the fault fired; the statement it fired at.
    fired: threading.Event = field(default_factory=threading.Event)
    statement: Statement | None = None

    def matches(self, text: str, history: list[str]) -> bool:
        """Whether ``text`` (sent after ``history`` on its connection) is a statement this fault waits for."""
        if not re.search(self.pattern, text):
            return False
        return self.after is None or any(re.search(self.after, earlier) for earlier in history)


class _Connection:
    """One proxied client connection and its parser state."""

    def __init__(self, number: int, client: asyncio.StreamWriter, server: asyncio.StreamWriter) -> None:
        self.number = number
        self.client = client
        self.server = server
        self.started = False
        self.prepared: dict[str, str] = {}
        self.portals: dict[str, str] = {}
        #: The texts run on this connection since its transaction began (for ``after``).
        self.history: list[str] = []
        #: A cut with ``answered``: made when the server next sends anything.
        self.cut_on_answer: StoreFault | None = None
        self.released = asyncio.Event()

    def close(self) -> None:
        for writer in (self.client, self.server):
            with contextlib.suppress(Exception):
                writer.transport.abort()


class StoreProxy:
    """The proxy, serving from a thread of its own (so tests in any event loop, or none, drive it)."""

    def __init__(self, target: tuple[str, int] = ("127.0.0.1", 5432)) -> None:
        self.target = target
        self.port = 0
        self.statements: list[Statement] = []
        self._faults: list[StoreFault] = []
        self._connections: dict[int, _Connection] = {}
        self._opened = 0
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="store-proxy", daemon=True)
        self._server: asyncio.AbstractServer | None = None
        # Spans of time new connections were refused: (from, to or None while still down).
        self._outages: list[tuple[float, float | None]] = []
        # While set, new connections wait for it before they reach the server.
        self._admitted: asyncio.Event | None = None
        self._held = 0

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> StoreProxy:
        """Listen on a free port of 127.0.0.1."""
        self._thread.start()
        self._call(self._listen)
        return self

    def stop(self) -> None:
        """Close everything and end the thread."""
        self._call(self._stop_listening)
        self._call(self._cut_all)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(scaled(10))

    def url(self, database_url: str) -> str:
        """``database_url`` (a PostgreSQL URL of the target) pointed at the proxy, without TLS."""
        head, _, tail = database_url.partition("@")
        _, _, path = tail.partition("/")
        path, _, query = path.partition("?")
        query = "&".join(part for part in (query, "sslmode=disable") if part)
        return f"{head}@127.0.0.1:{self.port}/{path}?{query}"

    # -- faults ------------------------------------------------------------------------------

    def arm(self, fault: StoreFault) -> StoreFault:
        """Break the store at the statement ``fault`` names (the next ones only)."""
        with self._lock:
            self._faults.append(fault)
        return fault

    def disarm(self) -> None:
        """Forget faults that have not fired."""
        with self._lock:
            self._faults.clear()

    def go_down(self) -> None:
        """The store is gone: live connections cut, new ones refused."""
        self._call(self._go_down)

    def come_back(self) -> None:
        """New connections are accepted again."""
        self._call(self._come_back)

    def release(self) -> None:
        """Let stalled statements through."""
        self._call(self._release_all)

    def hold_new(self) -> None:
        """New connections are accepted but reach the server only after :meth:`admit_new`."""
        self._call(self._hold_new)

    def admit_new(self) -> None:
        """Held and new connections reach the server again."""
        self._call(self._admit_new)

    @property
    def held(self) -> int:
        """How many new connections are being held now."""
        with self._lock:
            return self._held

    @property
    def down(self) -> bool:
        """Whether new connections are refused now."""
        with self._lock:
            return bool(self._outages) and self._outages[-1][1] is None

    def unreachable_between(self, start: float, end: float) -> bool:
        """Whether the store was cut or refused connections at any time in ``[start, end]`` (monotonic)."""
        with self._lock:
            return any(begin <= end and (until is None or until >= start) for begin, until in self._outages)

    def count(self) -> int:
        """How many statements the proxy has seen so far."""
        with self._lock:
            return len(self.statements)

    def since(self, mark: int) -> list[Statement]:
        """The statements seen after the first ``mark``."""
        with self._lock:
            return list(self.statements[mark:])

    # -- the event loop side ---------------------------------------------------------------------

    def _call(self, function: Callable[[], Coroutine[Any, Any, T]]) -> T:
        return asyncio.run_coroutine_threadsafe(function(), self._loop).result(scaled(10))

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(
            self._accept, "127.0.0.1", self.port or 0, reuse_address=True, backlog=256
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def _stop_listening(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _go_down(self) -> None:
        with self._lock:
            if not (self._outages and self._outages[-1][1] is None):
                self._outages.append((time.monotonic(), None))
        await self._stop_listening()
        await self._cut_all()

    async def _come_back(self) -> None:
        with self._lock:
            if self._outages and self._outages[-1][1] is None:
                self._outages[-1] = (self._outages[-1][0], time.monotonic())
        if self._server is None:
            await self._listen()

    async def _cut_all(self) -> None:
        with self._lock:
            connections = list(self._connections.values())
            self._connections.clear()
        for connection in connections:
            connection.close()

    async def _release_all(self) -> None:
        with self._lock:
            connections = list(self._connections.values())
        for connection in connections:
            connection.released.set()

    async def _hold_new(self) -> None:
        if self._admitted is None:
            self._admitted = asyncio.Event()

    async def _admit_new(self) -> None:
        admitted, self._admitted = self._admitted, None
        if admitted is not None:
            admitted.set()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._admitted is not None:
            with self._lock:
                self._held += 1
            try:
                await self._admitted.wait()
            finally:
                with self._lock:
                    self._held -= 1
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        with self._lock:
            self._opened += 1
            connection = _Connection(self._opened, writer, upstream_writer)
            self._connections[connection.number] = connection
        pumps = [
            asyncio.ensure_future(self._from_client(connection, reader)),
            asyncio.ensure_future(self._from_server(connection, upstream_reader)),
        ]
        await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        for pump in pumps:
            pump.cancel()
        connection.close()
        with self._lock:
            self._connections.pop(connection.number, None)

    async def _from_server(self, connection: _Connection, reader: asyncio.StreamReader) -> None:
        while data := await reader.read(65536):
            if connection.cut_on_answer is not None:
                await self._break(connection.cut_on_answer)
                return
            connection.client.write(data)
            await connection.client.drain()

    async def _from_client(self, connection: _Connection, reader: asyncio.StreamReader) -> None:
        while True:
            if not connection.started:
                head = await reader.readexactly(8)
                length, code = struct.unpack("!II", head)
                body = await reader.readexactly(length - 8)
                connection.started = code not in (_SSL_REQUEST, _GSSENC_REQUEST, _CANCEL_REQUEST)
                await self._send(connection, head + body)
                continue
            head = await reader.readexactly(_HEADER.size)
            kind, length = _HEADER.unpack(head)
            body = await reader.readexactly(length - 4)
            fault = self._parse(connection, kind, body)
            if fault is not None and not await self._apply(connection, fault):
                return
            await self._send(connection, head + body)

    async def _send(self, connection: _Connection, data: bytes) -> None:
        connection.server.write(data)
        await connection.server.drain()

    def _parse(self, connection: _Connection, kind: bytes, body: bytes) -> StoreFault | None:
        """Track prepared statements and portals; a fault that fires at this message, if any."""
        if kind == b"P":
            name, rest = _cstring(body)
            connection.prepared[name], _ = _cstring(rest)
        elif kind == b"B":
            portal, rest = _cstring(body)
            name, _ = _cstring(rest)
            connection.portals[portal] = connection.prepared.get(name, "")
        elif kind == b"C" and body[:1] == b"S":
            connection.prepared.pop(_cstring(body[1:])[0], None)
        elif kind in (b"Q", b"E"):
            text = _cstring(body)[0] if kind == b"Q" else connection.portals.get(_cstring(body)[0], "")
            return self._statement(connection, text)
        return None

    def _statement(self, connection: _Connection, text: str) -> StoreFault | None:
        with self._lock:
            statement = Statement(len(self.statements) + 1, text, connection.number, time.monotonic())
            self.statements.append(statement)
            if re.match(r"\s*(BEGIN|START)", text, re.IGNORECASE):
                connection.history = []
            fired = None
            for fault in self._faults:
                if fault.matches(text, connection.history):
                    fault.nth -= 1
                    if fault.nth == 0:
                        fired = fault
                        break
            connection.history.append(text)
            if fired is not None:
                self._faults.remove(fired)
                fired.statement = statement
        return fired

    async def _apply(self, connection: _Connection, fault: StoreFault) -> bool:
        """Act on a fault that fired at ``connection``'s statement; ``False``: the statement is dropped."""
        if fault.kind == "stall":
            fault.fired.set()
            await connection.released.wait()
            return True
        if fault.answered:
            connection.cut_on_answer = fault  # forwarded; the connections go when the server answers
            return True
        await self._break(fault)
        return False

    async def _break(self, fault: StoreFault) -> None:
        """Cut every connection (and, for a fault that takes the store ``down``, refuse new ones)."""
        now = time.monotonic()
        with self._lock:
            self._outages.append((now, None if fault.down else now))
        if fault.down:
            await self._stop_listening()
        await self._cut_all()
        fault.fired.set()


def _cstring(data: bytes) -> tuple[str, bytes]:
    """A NUL-terminated string at the start of ``data``, and what follows it."""
    end = data.index(b"\x00")
    return data[:end].decode("utf-8", errors="replace"), data[end + 1 :]
