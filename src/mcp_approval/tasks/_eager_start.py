"""Starting a task eagerly: its first step runs at once, inside the caller, up to its first suspension.

Python 3.12+ has this built in (``asyncio.Task(..., eager_start=True)``). On 3.11 the same start is
made from the pure-Python ``Task`` of the standard library, whose first step is run directly
instead of being scheduled with ``call_soon``. This leans on CPython 3.11's asyncio internals
(``tasks._PyTask``, its ``_Task__step``, ``_enter_task``/``_leave_task``/``_register_task``), which
no longer change in that release line; where any of them is missing a task is created the usual
way, so the cost is only speed, never behaviour.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
from collections.abc import Coroutine
from typing import Any

__all__ = ["start_eagerly"]


def start_eagerly(coro: Coroutine[Any, Any, None], *, name: str) -> asyncio.Task[None]:
    """Start ``coro`` in its own task, eagerly: at once, up to its first suspension.

    A call that finishes without suspending then never costs the event-loop round trips of a
    scheduled task (the task's first step, then the waiter's wake-up), and is answered in the
    same step as the request. Python 3.12+ has this built in (``eager_start``); on 3.11 the
    same start is made by :class:`_EagerTask`.
    """
    loop = asyncio.get_running_loop()
    if sys.version_info >= (3, 12):
        return asyncio.Task(coro, loop=loop, name=name, eager_start=True)  # type: ignore[call-arg,unused-ignore]
    if _EAGER_TASK_311 is None:  # pragma: no cover - an interpreter without asyncio's Python task
        return loop.create_task(coro, name=name)
    task = _EAGER_TASK_311(coro, loop=loop, name=name)
    task.start_eagerly()
    return task  # type: ignore[no-any-return]


def _eager_task_class_311() -> Any:
    """Python 3.11's Python ``Task``, started the way 3.12's ``eager_start`` starts a task.

    The task is the running task (``asyncio.current_task()``) throughout, the first step
    included, so anyio cancel scopes and ``asyncio.timeout`` entered in that step are exited in
    the task that entered them. ``None`` if this interpreter's asyncio lacks the pieces.
    """
    base: Any = getattr(asyncio.tasks, "_PyTask", None)
    future: Any = getattr(asyncio.futures, "_PyFuture", None)
    enter: Any = getattr(asyncio.tasks, "_enter_task", None)
    leave: Any = getattr(asyncio.tasks, "_leave_task", None)
    register: Any = getattr(asyncio.tasks, "_register_task", None)
    if None in (base, future, enter, leave, register) or not hasattr(base, "_Task__step"):
        return None

    class _EagerTask(base):  # type: ignore[misc]
        def __init__(self, coro: Coroutine[Any, Any, None], *, loop: asyncio.AbstractEventLoop, name: str) -> None:
            # Task.__init__ of 3.11 without its call_soon of the first step: start_eagerly runs it.
            future.__init__(self, loop=loop)
            self._name = name
            self._num_cancels_requested = 0
            self._must_cancel = False
            self._fut_waiter = None
            self._coro = coro
            self._context = contextvars.copy_context()
            register(self)

        def start_eagerly(self) -> None:
            # The step enters this task as the current one; the caller's task steps aside meanwhile.
            loop = self._loop
            caller = asyncio.current_task(loop)
            if caller is not None:
                leave(loop, caller)
            try:
                self._context.run(self._Task__step)
            finally:
                if caller is not None:
                    enter(loop, caller)

    return _EagerTask


_EAGER_TASK_311 = _eager_task_class_311() if sys.version_info < (3, 12) else None
