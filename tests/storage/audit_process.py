"""A separate process writing or linking audit events, for ``test_audit_linker.py``.

``python -m tests.storage.audit_process write URL NAME ROUNDS``: prints ``ready``, waits for a line
on stdin, then, with an :class:`AuditLinker` running, records ``ROUNDS`` times: a local request's
submission, its approval by another reviewer, and its execution (each its own transaction, each
after the previous committed), a pair of events in one transaction, and every fifth round an event
whose transaction rolls back. Prints ``done`` after stopping the linker.

``python -m tests.storage.audit_process hang URL``: links one batch of the unlinked events in a
transaction, prints ``linked N``, and waits for stdin without committing (the test kills it).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys

from sqlalchemy import Connection

from mcp_approval.storage import AuditLog, open_database
from mcp_approval.storage.audit_chain import link_batch
from mcp_approval.storage.audit_linker import AuditLinker


class _Refused(Exception):
    pass


async def _write(url: str, name: str, rounds: int) -> None:
    database = open_database(url)
    log = AuditLog(database)
    linker = AuditLinker(log, interval_s=0.05, settle_s=0.001)
    try:
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        await linker.start()
        for n in range(rounds):
            request = f"{name}-req-{n}"
            submitted = {"tool": "transfer", "approvals_required": 1, "self_approval": False}
            await log.record("approval.submitted", subject=request, actor=f"{name}-alice", data=submitted)
            await log.record("approval.decision", subject=request, actor=f"{name}-bob", data={"decision": "approve"})
            execution = {"backend": "local", "request": request}
            await log.record("approval.execution_claimed", subject=f"{name}-task-{n}", data=execution)
            await database.write(lambda conn, n=n: _pair(log, conn, f"{name}-pair-{n}"))
            if n % 5 == 0:
                with contextlib.suppress(_Refused):
                    await database.write(lambda conn, n=n: _refused(log, conn, f"{name}-refused-{n}"))
        await linker.stop()
        print("done", flush=True)
    finally:
        await database.close()


def _pair(log: AuditLog, conn: Connection, subject: str) -> None:
    log.record_in(conn, 1, "pair.first", subject=subject)
    log.record_in(conn, 1, "pair.second", subject=subject)


def _refused(log: AuditLog, conn: Connection, subject: str) -> None:
    log.record_in(conn, 1, "refused", subject=subject)
    raise _Refused


async def _hang(url: str) -> None:
    database = open_database(url)

    def link_and_wait(conn: Connection) -> int:
        linked = link_batch(conn)
        print(f"linked {linked}", flush=True)
        sys.stdin.readline()  # never answered: the process is killed inside its transaction
        return linked

    await database.write(link_and_wait)


def main(argv: list[str]) -> None:
    """Run the command ``argv`` names (see the module docstring)."""
    if argv[0] == "write":
        asyncio.run(_write(argv[1], argv[2], int(argv[3])))
    elif argv[0] == "hang":
        asyncio.run(_hang(argv[1]))


if __name__ == "__main__":
    main(sys.argv[1:])
