"""Waiting for a condition by polling the system under test, with a hard bound."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from tests.support.timing import scaled

T = TypeVar("T")


async def eventually(
    probe: Callable[[], Awaitable[T]],
    accept: Callable[[T], bool],
    *,
    timeout_s: float | None = None,
    every_s: float = 0.02,
) -> T:
    """Call ``probe`` until ``accept`` holds for its value; fail after ``timeout_s`` (by default ``scaled(15)``)."""
    limit_s = scaled(15) if timeout_s is None else timeout_s
    deadline = time.monotonic() + limit_s
    while True:
        value = await probe()
        if accept(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not reached within {limit_s:.0f}s; last value: {value!r}")
        await asyncio.sleep(every_s)
