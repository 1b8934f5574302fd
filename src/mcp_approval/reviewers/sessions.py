"""Reviewer console sessions: a server-side table keyed by opaque cookie values, and CSRF tokens.

Why a server-side table and not a signed cookie: logout and expiry really end a session (a
signed cookie stays valid until it expires, whoever holds a copy), nothing about the reviewer
travels in the cookie, and no signing secret has to be configured or shared. The cookie value
is 256 random bits; the table is keyed by its SHA-256, so the table never holds a usable
cookie. The bearer token is kept in the session so that every request re-checks it: a session
lives no longer than its token is accepted. It is stored sealed (AES-GCM under a key derived from
the cookie), so only a request carrying the cookie can open it.

The table is a :class:`SessionTable`: in memory by default (one process), or the store's
``console_sessions`` table (:class:`~mcp_approval.reviewers.session_table.SqlSessionTable`,
what ``serve`` and ``arap-server`` use), so a sign-in on one worker is valid on every worker on
the same store, and a restart does not sign reviewers out.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from mcp_approval.clock import Clock

__all__ = [
    "DEFAULT_CAPACITY",
    "DEFAULT_IDLE_S",
    "DEFAULT_MAX_AGE_S",
    "FlashKind",
    "MemorySessionTable",
    "Session",
    "SessionStore",
    "SessionTable",
    "StoredSession",
]

#: A session unused this long ends.
DEFAULT_IDLE_S = 3600.0
#: A session ends this long after login, however busy.
DEFAULT_MAX_AGE_S = 12 * 3600.0
#: Sessions kept at most; beyond it the least recently used one is dropped.
DEFAULT_CAPACITY = 10_000

FlashKind = Literal["ok", "error"]


@dataclass(frozen=True)
class StoredSession:
    """A session as a table holds it: the token sealed, the flashes not yet shown."""

    principal: str
    sealed_token: str
    csrf: str
    created_ms: int
    seen_ms: int
    flashes: tuple[tuple[FlashKind, str], ...] = ()


class SessionTable(Protocol):
    """Where sessions live, keyed by the SHA-256 of their cookie."""

    async def insert(self, key: str, stored: StoredSession, *, capacity: int) -> None:
        """Add a session, first dropping the least recently used ones beyond ``capacity - 1``."""
        ...

    async def touch(self, key: str, now_ms: int, *, seen_after_ms: int, created_after_ms: int) -> StoredSession | None:
        """The live session under ``key`` as it was, marked used now and its flashes taken; an
        expired one (seen at or before ``seen_after_ms``, or created at or before
        ``created_after_ms``) is removed and ``None`` returned."""
        ...

    async def add_flash(self, key: str, kind: FlashKind, message: str) -> None:
        """Queue a message for the session's next page."""
        ...

    async def remove(self, key: str) -> None:
        """End the session under ``key``, if any."""
        ...

    async def count(self) -> int:
        """How many sessions are held."""
        ...


@dataclass
class Session:
    """One signed-in reviewer.

    Attributes:
        key: the SHA-256 of the session's cookie.
        principal: who signed in.
        token: the bearer token they signed in with (re-checked on every request; never sent back).
        csrf: the token every form of this session carries.
        created_ms: when they signed in (epoch ms).
        seen_ms: their latest request (epoch ms).
        flashes: messages for the page this request renders.
    """

    key: str
    principal: str
    token: str
    csrf: str
    created_ms: int
    seen_ms: int
    flashes: list[tuple[FlashKind, str]] = field(default_factory=list)

    def take_flashes(self) -> list[tuple[FlashKind, str]]:
        """The messages to show now, which are then forgotten."""
        taken, self.flashes = self.flashes, []
        return taken

    def csrf_matches(self, candidate: str | None) -> bool:
        """Whether a submitted form's CSRF token is this session's (in constant time)."""
        return candidate is not None and hmac.compare_digest(candidate.encode(), self.csrf.encode())


class MemorySessionTable:
    """:class:`SessionTable` in this process's memory."""

    def __init__(self) -> None:
        self._rows: dict[str, StoredSession] = {}

    async def insert(self, key: str, stored: StoredSession, *, capacity: int) -> None:
        """See :meth:`SessionTable.insert`."""
        while len(self._rows) >= capacity:
            del self._rows[min(self._rows, key=lambda k: self._rows[k].seen_ms)]
        self._rows[key] = stored

    async def touch(self, key: str, now_ms: int, *, seen_after_ms: int, created_after_ms: int) -> StoredSession | None:
        """See :meth:`SessionTable.touch`."""
        for other in [k for k, s in self._rows.items() if _expired(s, seen_after_ms, created_after_ms)]:
            del self._rows[other]
        stored = self._rows.get(key)
        if stored is not None:
            self._rows[key] = replace(stored, seen_ms=now_ms, flashes=())
        return stored

    async def add_flash(self, key: str, kind: FlashKind, message: str) -> None:
        """See :meth:`SessionTable.add_flash`."""
        stored = self._rows.get(key)
        if stored is not None:
            self._rows[key] = replace(stored, flashes=(*stored.flashes, (kind, message)))

    async def remove(self, key: str) -> None:
        """See :meth:`SessionTable.remove`."""
        self._rows.pop(key, None)

    async def count(self) -> int:
        """See :meth:`SessionTable.count`."""
        return len(self._rows)


class SessionStore:
    """Console sessions over a :class:`SessionTable`.

    Args:
        clock: the source of time for expiry.
        idle_s: a session unused this long ends.
        max_age_s: a session ends this long after login.
        capacity: the most sessions kept at once.
        table: where sessions live (by default this process's memory).
    """

    def __init__(
        self,
        clock: Clock,
        *,
        idle_s: float = DEFAULT_IDLE_S,
        max_age_s: float = DEFAULT_MAX_AGE_S,
        capacity: int = DEFAULT_CAPACITY,
        table: SessionTable | None = None,
    ) -> None:
        if idle_s <= 0 or max_age_s <= 0 or capacity < 1:
            raise ValueError("session idle_s and max_age_s must be positive and capacity at least 1")
        self._clock = clock
        self._idle_ms = int(idle_s * 1000)
        self._max_age_ms = int(max_age_s * 1000)
        self._capacity = capacity
        self.table: SessionTable = table or MemorySessionTable()

    @property
    def max_age_s(self) -> int:
        """The longest a session lives, in whole seconds (the cookie's Max-Age)."""
        return self._max_age_ms // 1000

    async def create(self, principal: str, token: str) -> tuple[str, Session]:
        """A new session for ``principal``; returns the cookie value and the session."""
        now = self._clock.now_ms()
        cookie = secrets.token_urlsafe(32)
        csrf = secrets.token_urlsafe(32)
        stored = StoredSession(principal, _seal(cookie, token), csrf, created_ms=now, seen_ms=now)
        await self.table.insert(_key(cookie), stored, capacity=self._capacity)
        return cookie, Session(_key(cookie), principal, token, csrf, created_ms=now, seen_ms=now)

    async def get(self, cookie: str | None) -> Session | None:
        """The live session a cookie names (marking it used and taking its queued messages), or ``None``."""
        if not cookie:
            return None
        now = self._clock.now_ms()
        key = _key(cookie)
        stored = await self.table.touch(
            key, now, seen_after_ms=now - self._idle_ms, created_after_ms=now - self._max_age_ms
        )
        if stored is None:
            return None
        if _expired(stored, now - self._idle_ms, now - self._max_age_ms):
            await self.table.remove(key)
            return None
        token = _unseal(cookie, stored.sealed_token)
        if token is None:
            return None
        return Session(key, stored.principal, token, stored.csrf, stored.created_ms, now, list(stored.flashes))

    async def flash(self, session: Session, kind: FlashKind, message: str) -> None:
        """Show ``message`` on the next page rendered for ``session``."""
        await self.table.add_flash(session.key, kind, message)

    async def drop(self, cookie: str | None) -> None:
        """End the session a cookie names, if any."""
        if cookie:
            await self.table.remove(_key(cookie))

    async def count(self) -> int:
        """How many sessions the table holds."""
        return await self.table.count()


def _expired(stored: StoredSession, seen_after_ms: int, created_after_ms: int) -> bool:
    return stored.seen_ms <= seen_after_ms or stored.created_ms <= created_after_ms


def _key(cookie: str) -> str:
    return hashlib.sha256(cookie.encode()).hexdigest()


def _cipher(cookie: str) -> AESGCM:
    # A key of its own for sealing, distinct from the table key (the cookie's plain SHA-256).
    return AESGCM(hashlib.sha256(b"mcp-approval console token\x00" + cookie.encode()).digest())


def _seal(cookie: str, token: str) -> str:
    nonce = secrets.token_bytes(12)
    return base64.urlsafe_b64encode(nonce + _cipher(cookie).encrypt(nonce, token.encode(), None)).decode()


def _unseal(cookie: str, sealed: str) -> str | None:
    try:
        raw = base64.urlsafe_b64decode(sealed.encode())
        return _cipher(cookie).decrypt(raw[:12], raw[12:], None).decode()
    except (ValueError, InvalidTag):
        return None
