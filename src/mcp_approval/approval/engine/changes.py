"""Following a backend's change feed, so pending requests need not be polled one by one.

With a backend that offers :class:`~mcp_approval.backends.SupportsChangeFeed` (the local
backend), each driver pass asks for the requests that left ``pending`` since the previous pass
and wakes the workflow driver for each; a still-pending request is then polled only every
``fallback_poll_interval_s``. A pass therefore costs what changed, not what is pending.

The feed is read with a look-back window, so a change committed a little after the time it
carries (a slow transaction, another host's clock) is still seen; a change outside even that
window is caught by the fallback poll. A change already delivered is not delivered again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from mcp_approval.backends import ApprovalBackend, ApprovalBackendError, SupportsChangeFeed
from mcp_approval.clock import Clock

__all__ = ["ChangeFollower"]

logger = logging.getLogger("mcp_approval.approval")

#: How far back of the previous pass each read of the feed starts.
LOOK_BACK_MS = 10_000


class ChangeFollower:
    """Reads a backend's change feed each pass and wakes the workflow driver for every new change.

    Args:
        backend: the approval backend (a follower of one without a feed does nothing).
        clock: the source of time.
        wake: the workflow driver's wake-up (called with a request handle).
        first_look_back_ms: how far back the first read starts (changes made while no worker ran).
        enabled: ``False`` ignores the feed (pending requests are then polled).
    """

    def __init__(
        self,
        backend: ApprovalBackend,
        clock: Clock,
        wake: Callable[[str], Awaitable[None]],
        *,
        first_look_back_ms: int,
        enabled: bool = True,
    ) -> None:
        self.backend = backend
        self.clock = clock
        self.wake = wake
        self.first_look_back_ms = first_look_back_ms
        self.enabled = enabled
        self._next_from: int | None = None
        self._delivered: dict[str, int] = {}

    @property
    def active(self) -> bool:
        """Whether the backend offers a change feed (else pending requests are polled)."""
        return self.enabled and isinstance(self.backend, SupportsChangeFeed)

    async def follow(self) -> int:
        """Wake the workflow driver for each change since the previous pass; returns how many were new."""
        backend = self.backend
        if not self.enabled or not isinstance(backend, SupportsChangeFeed):
            return 0
        now = self.clock.now_ms()
        start = self._next_from if self._next_from is not None else now - self.first_look_back_ms
        since = start - LOOK_BACK_MS
        try:
            changes = await backend.changed_since(since)
        except ApprovalBackendError as exc:
            logger.warning("approval change feed unavailable; read again next pass (%s)", exc)
            return 0
        self._next_from = now
        woken = 0
        for handle, changed_at in changes:
            if self._delivered.get(handle) == changed_at:
                continue
            self._delivered[handle] = changed_at
            await self.wake(handle)
            woken += 1
        self._delivered = {handle: at for handle, at in self._delivered.items() if at >= since}
        return woken
