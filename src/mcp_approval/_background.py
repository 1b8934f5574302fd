"""Stopping background loops without cutting a store call in half.

A query cut off by task cancellation is cancelled by asyncpg on a connection of its own, which
outlives the stop and may be cut short in turn by a closing event loop (an unretrieved
``ConnectionError``, asyncpg issues 1211 and 1310). So a stop first asks its loops to end (an
event they wait on between rounds), gives them :data:`STOP_GRACE_S` to finish the call in flight,
and cancels only what still runs then.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

__all__ = ["STOP_GRACE_S", "finish_or_cancel", "pause_unless_stopping"]

#: How long a stop lets a background task finish what it is doing before cancelling it.
STOP_GRACE_S = 5.0


async def finish_or_cancel(tasks: Iterable[asyncio.Task[Any] | None], grace_s: float = STOP_GRACE_S) -> None:
    """Wait up to ``grace_s`` for ``tasks`` to end, cancel those still running, and wait for every one.

    The caller has already told the tasks to stop. Their exceptions are not raised here: each
    task logs its own failures, and a stop must go on to close what the tasks used.
    """
    pending = {task for task in tasks if task is not None}
    if not pending:
        return
    _, running = await asyncio.wait(pending, timeout=grace_s)
    for task in running:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)


async def pause_unless_stopping(stopping: asyncio.Event, seconds: float) -> None:
    """Wait ``seconds`` between a loop's rounds, or less if ``stopping`` is set meanwhile."""
    try:
        await asyncio.wait_for(stopping.wait(), seconds)
    except TimeoutError:
        return
