"""Running a costly step on a worker thread, so that the event loop keeps answering other callers.

Mapping, deciding and sealing a large value (:func:`mcp_approval.json_shape.large_json`) takes long
enough to stall every other request of the process; a small one costs less than the thread hop.
:func:`off_loop` takes the caller's answer to "is it large?" and runs the step where it is cheaper.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import anyio.to_thread

__all__ = ["off_loop"]

_T = TypeVar("_T")


async def off_loop(large: bool, function: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """``function(*args, **kwargs)``: on a worker thread when ``large``, else inline (a thread hop costs more)."""
    if not large:
        return function(*args, **kwargs)
    return await anyio.to_thread.run_sync(functools.partial(function, *args, **kwargs))
