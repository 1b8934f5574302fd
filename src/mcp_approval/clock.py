"""Time as an injectable dependency.

Everything that reads the time takes a :class:`Clock`, so tests can move time by hand
instead of sleeping.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock", "iso8601", "parse_iso8601"]


class Clock(Protocol):
    """A source of wall-clock time in integer milliseconds since the Unix epoch."""

    def now_ms(self) -> int:
        """Return the current time in milliseconds since the epoch."""
        ...


class SystemClock:
    """The real clock."""

    def now_ms(self) -> int:
        """Return :func:`time.time` in whole milliseconds."""
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to; for tests and simulations."""

    def __init__(self, start_ms: int = 1_780_000_000_000) -> None:
        self._now = start_ms

    def now_ms(self) -> int:
        """Return the current manual time."""
        return self._now

    def advance(self, ms: int) -> None:
        """Move the clock forward by ``ms`` milliseconds."""
        if ms < 0:
            raise ValueError("a clock only moves forward")
        self._now += ms


def iso8601(ms: int) -> str:
    """Format epoch milliseconds as an ISO 8601 UTC timestamp with millisecond precision."""
    seconds, millis = divmod(ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


def parse_iso8601(value: object) -> int | None:
    """An RFC 3339 / ISO 8601 timestamp with a zone as epoch milliseconds.

    ``None`` for anything else (absent, not a string, unparseable, or without a zone): a
    timestamp that cannot be read is never guessed.
    """
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return None if parsed.tzinfo is None else round(parsed.timestamp() * 1000)
