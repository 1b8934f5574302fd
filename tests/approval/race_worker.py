"""One side of the two-process claim-vs-fence race (run by ``test_claim_race.py``; not a test module).

Usage: ``python race_worker.py DATABASE_URL ROLE IDS_FILE`` where ROLE is ``A`` (claim each task) or
``B`` (fence each task as cancelled) and IDS_FILE is a JSON list of task ids.

Protocol on stdout, one line each: ``ready`` once the database is open and both connection pools hold
a live connection; then, after the line ``go`` arrives on stdin, one JSON object
``{"role": ..., "won": [...], "lost": [...], "errors": {...}}`` listing which ids this worker won.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from sqlalchemy import Connection, text

from mcp_approval.approval.persistence.store import ApprovalStore, TaskOutcome
from mcp_approval.storage import StoreUnavailableError, open_database
from mcp_approval.tasks.states import TaskStatus

LEASE_MS = 60_000
DEADLINE_MS = 120_000


def _ping(conn: Connection) -> int:
    return int(conn.execute(text("SELECT 1")).scalar_one())


async def run(url: str, role: str, task_ids: list[str]) -> dict[str, object]:
    database = open_database(url)
    store = ApprovalStore(database, result_retention_ms=60_000)
    try:
        await database.write(_ping)  # connect both pools before saying ready
        await database.read(_ping)
        print("ready", flush=True)
        line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        if line.strip() != "go":
            raise SystemExit(f"expected 'go' on stdin, got {line!r}")
        won: list[str] = []
        lost: list[str] = []
        errors: dict[str, str] = {}
        for task_id in task_ids:
            try:
                if role == "A":
                    now = store.clock.now_ms()
                    ok = await store.claim(
                        task_id, 1, "worker-A", lease_until=now + LEASE_MS, deadline=now + DEADLINE_MS
                    )
                else:
                    ok = await store.fence(task_id, TaskOutcome(TaskStatus.CANCELLED, "Cancelled"))
            except StoreUnavailableError as exc:
                errors[task_id] = str(exc)
                break  # the other side settles the rest; a deadlock would cost a second per task
            (won if ok else lost).append(task_id)
        return {"role": role, "won": won, "lost": lost, "errors": errors}
    finally:
        await database.close()


def main() -> None:
    url, role, ids_file = sys.argv[1:4]
    if role not in ("A", "B"):
        raise SystemExit(f"role must be A or B, not {role!r}")
    task_ids = json.loads(Path(ids_file).read_text())
    report = asyncio.run(run(url, role, task_ids))
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
