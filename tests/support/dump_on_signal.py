"""``python -m tests.support.dump_on_signal MODULE ARGS...``: run ``python -m MODULE ARGS...`` with stack dumps.

On ``SIGUSR1`` every thread's stack goes to stderr (``faulthandler``, which works even when the
event loop is blocked in a C call); on ``SIGUSR2`` every asyncio task's stack does. Tests that
find a server subprocess hung send both before killing it, so the failure shows where it waited.
"""

from __future__ import annotations

import asyncio
import faulthandler
import runpy
import signal
import sys
from types import FrameType


def dump_tasks(_signum: int, _frame: FrameType | None) -> None:
    """Print the stack of every task of the running loop (the handler runs on the loop's thread)."""
    try:
        tasks = asyncio.all_tasks(asyncio.get_running_loop())
    except RuntimeError:
        print("dump_on_signal: no running event loop", file=sys.stderr, flush=True)
        return
    print(f"dump_on_signal: {len(tasks)} asyncio tasks", file=sys.stderr)
    for task in tasks:
        task.print_stack(file=sys.stderr)
    sys.stderr.flush()


def main() -> None:
    """Install the dumps, then run the module named by the first argument as ``__main__``."""
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    signal.signal(signal.SIGUSR2, dump_tasks)
    module, sys.argv = sys.argv[1], sys.argv[1:]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
