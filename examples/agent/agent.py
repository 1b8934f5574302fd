"""A short agent: one wire transfer through ``mcp_client``, keyed so it never runs twice.

Run the treasury example (``mcp-approval serve --config examples/treasury/config.toml``), then::

    python examples/agent/agent.py http://127.0.0.1:8000/mcp --call-key run-1/transfer-1

The transfer waits for a reviewer (carol approves it in the console). Stop the agent at any
point and run it again with the same ``--call-key``: it polls the same task, or prints the
result it already recorded, and the treasury ledger shows one transfer.

``--crash-at journaled`` or ``--crash-at finished`` make the agent kill itself (SIGKILL) right
after it journals the task id or the outcome; the tests use them to stop it at those points.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
from pathlib import Path

from mcp_types import TextContent

from mcp_approval.client import CallOutcome, SQLiteCallJournal, TaskPendingError, mcp_client


class CrashingJournal(SQLiteCallJournal):
    """The SQLite journal, killing the process right after one kind of write (for crash tests)."""

    def __init__(self, path: Path, crash_at: str | None) -> None:
        super().__init__(path)
        self.crash_at = crash_at

    async def task_created(self, call_key: str, task_id: str) -> None:
        await super().task_created(call_key, task_id)
        print(f"journaled task {task_id}", flush=True)
        self._crash_if("journaled")

    async def finish(self, call_key: str, outcome: CallOutcome) -> None:
        await super().finish(call_key, outcome)
        self._crash_if("finished")

    def _crash_if(self, point: str) -> None:
        if self.crash_at == point:
            os.kill(os.getpid(), signal.SIGKILL)


async def main(url: str, call_key: str, to: str, journal_path: Path, crash_at: str | None) -> None:
    journal = CrashingJournal(journal_path, crash_at)
    token = os.environ.get("AGENT_TOKEN", "alice-token")
    async with mcp_client(url, tasks=True, task_wait_s=60, auth=token, call_journal=journal) as client:
        try:
            result = await client.call_tool("wire_transfer", {"to": to, "amount": 30_000}, call_key=call_key)
        except TaskPendingError as pending:
            print(f"still waiting: {pending.details}", flush=True)
            return
    text = " ".join(item.text for item in result.content if isinstance(item, TextContent))
    print(f"result: {text}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--call-key", required=True)
    parser.add_argument("--to", default="acme", help="the account credited")
    parser.add_argument("--journal", type=Path, default=Path("agent-calls.sqlite3"))
    parser.add_argument("--crash-at", choices=["journaled", "finished"])
    options = parser.parse_args()
    asyncio.run(main(options.url, options.call_key, options.to, options.journal, options.crash_at))
