"""Reviewer console sessions: a server-side table keyed by opaque cookie values, and CSRF tokens.

Why a server-side table and not a signed cookie: logout and expiry really end a session (a
signed cookie stays valid until it expires, whoever holds a copy), nothing about the reviewer
travels in the cookie, and no signing secret has to be configured or shared. The cookie value
is 256 random bits; the table is keyed by its SHA-256, so the table never holds a usable
cookie. The bearer token is kept in the session (server memory only) so that every request
re-checks it: a session lives no longer than its token is accepted. The cost is that sessions
belong to one process: behind a load balancer over several ``serve`` processes the console
needs sticky sessions, and a restart signs reviewers out.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass, field
from typing import Literal

from mcp_approval.clock import Clock

__all__ = ["DEFAULT_CAPACITY", "DEFAULT_IDLE_S", "DEFAULT_MAX_AGE_S", "FlashKind", "Session", "SessionStore"]

#: A session unused this long ends.
DEFAULT_IDLE_S = 3600.0
#: A session ends this long after login, however busy.
DEFAULT_MAX_AGE_S = 12 * 3600.0
#: Sessions kept at most; beyond it the least recently used one is dropped.
DEFAULT_CAPACITY = 10_000

FlashKind = Literal["ok", "error"]


@dataclass
class Session:
    """One signed-in reviewer.

    Attributes:
        principal: who signed in.
        token: the bearer token they signed in with (re-checked on every request; never sent back).
        csrf: the token every form of this session carries.
        created_ms: when they signed in (epoch ms).
        seen_ms: their latest request (epoch ms).
        flashes: messages for the next page they see.
    """

    principal: str
    token: str
    csrf: str
    created_ms: int
    seen_ms: int
    flashes: list[tuple[FlashKind, str]] = field(default_factory=list)

    def flash(self, kind: FlashKind, message: str) -> None:
        """Show ``message`` on the next page rendered for this session."""
        self.flashes.append((kind, message))

    def take_flashes(self) -> list[tuple[FlashKind, str]]:
        """The pending messages, which are then forgotten."""
        taken, self.flashes = self.flashes, []
        return taken

    def csrf_matches(self, candidate: str | None) -> bool:
        """Whether a submitted form's CSRF token is this session's (in constant time)."""
        return candidate is not None and hmac.compare_digest(candidate.encode(), self.csrf.encode())


class SessionStore:
    """Console sessions in this process's memory.

    Args:
        clock: the source of time for expiry.
        idle_s: a session unused this long ends.
        max_age_s: a session ends this long after login.
        capacity: the most sessions kept at once.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        idle_s: float = DEFAULT_IDLE_S,
        max_age_s: float = DEFAULT_MAX_AGE_S,
        capacity: int = DEFAULT_CAPACITY,
    ) -> None:
        if idle_s <= 0 or max_age_s <= 0 or capacity < 1:
            raise ValueError("session idle_s and max_age_s must be positive and capacity at least 1")
        self._clock = clock
        self._idle_ms = int(idle_s * 1000)
        self._max_age_ms = int(max_age_s * 1000)
        self._capacity = capacity
        self._sessions: dict[str, Session] = {}

    @property
    def max_age_s(self) -> int:
        """The longest a session lives, in whole seconds (the cookie's Max-Age)."""
        return self._max_age_ms // 1000

    def create(self, principal: str, token: str) -> tuple[str, Session]:
        """A new session for ``principal``; returns the cookie value and the session."""
        now = self._clock.now_ms()
        self._make_room(now)
        cookie = secrets.token_urlsafe(32)
        session = Session(principal, token, secrets.token_urlsafe(32), created_ms=now, seen_ms=now)
        self._sessions[_key(cookie)] = session
        return cookie, session

    def get(self, cookie: str | None) -> Session | None:
        """The live session a cookie names (marking it used), or ``None``."""
        if not cookie:
            return None
        key = _key(cookie)
        session = self._sessions.get(key)
        if session is None:
            return None
        now = self._clock.now_ms()
        if self._expired(session, now):
            del self._sessions[key]
            return None
        session.seen_ms = now
        return session

    def drop(self, cookie: str | None) -> None:
        """End the session a cookie names, if any."""
        if cookie:
            self._sessions.pop(_key(cookie), None)

    def __len__(self) -> int:
        return len(self._sessions)

    def _expired(self, session: Session, now: int) -> bool:
        return now - session.seen_ms >= self._idle_ms or now - session.created_ms >= self._max_age_ms

    def _make_room(self, now: int) -> None:
        if len(self._sessions) < self._capacity:
            return
        for key in [k for k, s in self._sessions.items() if self._expired(s, now)]:
            del self._sessions[key]
        while len(self._sessions) >= self._capacity:
            oldest = min(self._sessions, key=lambda k: self._sessions[k].seen_ms)
            del self._sessions[oldest]


def _key(cookie: str) -> str:
    return hashlib.sha256(cookie.encode()).hexdigest()
