"""Named crash-injection points for the crash-consistency tests.

Every layer that has a point worth dying at (the approval workflow, the notification outbox)
names it here, so the tests and the code agree on the names; importing this module loads nothing
else of the package.

``MCP_APPROVAL_CRASH_AT=<name>`` makes the process kill itself (SIGKILL, no cleanup) when it
reaches that point, so a test can restart it on the same database and check that nothing ran
twice and nothing was orphaned. Unset (always, in production), each point costs one lookup in
the environment.

``MCP_APPROVAL_PAUSE_AT=<name>`` makes the process stop itself (SIGSTOP) there instead, so a test can
hold it past a deadline (a starved host) and resume it with SIGCONT.
"""

from __future__ import annotations

import os
import signal
from typing import Final, Literal

__all__ = ["CRASH_ENV", "CRASH_POINTS", "ONE_TRANSACTION_CRASH_POINTS", "PAUSE_ENV", "CrashPoint", "crash_point"]

CRASH_ENV: Final = "MCP_APPROVAL_CRASH_AT"
PAUSE_ENV: Final = "MCP_APPROVAL_PAUSE_AT"
CrashPoint = Literal[
    "in_creation_transaction",
    "after_intent",
    "after_submit",
    "after_handle",
    "after_task",
    "after_claim",
    "after_side_effect",
    "after_notification_sent",
]
#: The points of an approval-gated call whose backend is remote (creation in steps, each committed
#: before the next), in the order the call reaches them (the crash suites run each).
CRASH_POINTS: Final[tuple[CrashPoint, ...]] = (
    "after_intent",
    "after_submit",
    "after_handle",
    "after_task",
    "after_claim",
    "after_side_effect",
)
#: The points of an approval-gated call whose backend shares the server's database: creation is one
#: transaction, killed before its commit (``in_creation_transaction``) or after it (``after_task``).
ONE_TRANSACTION_CRASH_POINTS: Final[tuple[CrashPoint, ...]] = (
    "in_creation_transaction",
    "after_task",
    "after_claim",
    "after_side_effect",
)


def crash_point(name: CrashPoint) -> None:
    """Die (or stop) at once if the environment names this point (read each time: a process may be forked)."""
    if name == os.environ.get(CRASH_ENV):
        os.kill(os.getpid(), signal.SIGKILL)
    if name == os.environ.get(PAUSE_ENV):
        os.kill(os.getpid(), signal.SIGSTOP)
