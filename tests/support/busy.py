"""Retrying a call the way a client told "the store is busy, try again in N s" does."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from mcp_approval.checks.wire import Reply

__all__ = ["retry_after_s", "until_served"]


def retry_after_s(reply: Reply) -> float | None:
    """For a "store busy, try again" answer (``error.data.retryAfterMs``), the seconds to wait; else ``None``."""
    error = reply.body.get("error")
    data = error.get("data") if isinstance(error, dict) else None
    return data["retryAfterMs"] / 1000 if isinstance(data, dict) and "retryAfterMs" in data else None


async def until_served(send: Callable[[], Awaitable[Reply]]) -> Reply:
    """``send()`` again, as a client told to, while the answer is that the store is busy; the first other answer.

    An overloaded server (a burst of calls on a busy machine) may answer some calls that way instead
    of serving them; the wait between tries is the one the answer asks for.
    """
    reply = await send()
    while (wait_s := retry_after_s(reply)) is not None:
        await asyncio.sleep(wait_s)  # the server's own "try again in N s"
        reply = await send()
    return reply
