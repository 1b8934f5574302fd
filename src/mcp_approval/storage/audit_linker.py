"""Linking the audit chain in the background of a serving process, off every request's path.

Requests only insert their audit events (:meth:`~mcp_approval.storage.audit.AuditLog.record_in`);
an :class:`AuditLinker` links them (:meth:`~mcp_approval.storage.audit.AuditLog.link`) every
``interval_s``, and soon after an event is recorded through its audit log. Every worker runs
one: a linker that finds another's linking transaction holding the head row leaves the batch to
it instead of waiting (the next wake-up or interval links what committed after it looked). Readers of
the chain link on demand anyway; the linker keeps the chain's head current for the anchors and
the notification outbox, and keeps the batches small.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from mcp_approval.storage.audit import AuditLog

__all__ = ["AuditLinker"]

_log = logging.getLogger(__name__)


class AuditLinker:
    """Links an audit log's committed events every ``interval_s``, and ``settle_s`` after one is recorded.

    Args:
        audit: the audit log to link (its :meth:`~AuditLog.record_in` wakes the linker).
        interval_s: the longest an event committed by any process waits to be linked.
        settle_s: how long after a wake-up the linker waits before linking: the recording
            transaction commits meanwhile, and the events recorded meanwhile join its batch. (A
            wake-up comes before the commit; an event whose transaction commits later than this
            is linked at the next wake-up or interval, or by the next reader.)
    """

    def __init__(self, audit: AuditLog, *, interval_s: float = 0.5, settle_s: float = 0.1) -> None:
        self._audit = audit
        self._interval_s = interval_s
        self._settle_s = settle_s
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wakeup = asyncio.Event()
        self._stopping = asyncio.Event()
        self._woken = False
        self._unwatch: Callable[[], None] | None = None

    async def start(self) -> None:
        """Start linking in the background."""
        self._loop = asyncio.get_running_loop()
        self._stopping.clear()
        self._unwatch = self._audit.when_recorded(self.wake)
        self._task = asyncio.create_task(self._run(), name="audit-linker")

    async def stop(self) -> None:
        """Stop the background linking (a batch in progress is finished first), then link once more."""
        if self._unwatch is not None:
            self._unwatch()
            self._unwatch = None
        task, self._task = self._task, None
        self._stopping.set()
        self._wakeup.set()
        if task is not None:
            await task
        await self._link_logged()

    def wake(self) -> None:
        """Link soon: an event is being recorded. Safe from any thread; cheap when already woken."""
        loop = self._loop
        if self._woken or loop is None:
            return
        self._woken = True
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing runs the linker any more
            loop.call_soon_threadsafe(self._wakeup.set)

    async def _run(self) -> None:
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), self._interval_s)
            if self._woken and not self._stopping.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), self._settle_s)
            # Cleared before linking: an event recorded during the batch wakes the next one.
            self._woken = False
            self._wakeup.clear()
            if not self._stopping.is_set():
                await self._link_logged()

    async def _link_logged(self) -> None:
        """:meth:`AuditLog.link`; a failure is logged and retried at the next run (nothing is lost)."""
        try:
            await self._audit.link(background=not self._stopping.is_set())
        except Exception as exc:  # the store being down must not stop serving; the events wait
            _log.warning("audit events not linked yet: %s: %s", type(exc).__name__, exc)
