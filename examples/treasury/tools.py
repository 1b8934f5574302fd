"""The treasury example's tools.

``mcp-approval serve`` imports this file and calls :func:`register`. The ledger is an
append-only JSON-lines file, flushed to disk before a tool returns: it is the side effect the
approval tests count (``ledger()`` returns every executed transfer).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer

__all__ = ["Ledger", "register"]


class Ledger:
    """An append-only, fsynced record of executed operations."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def append(self, entry: dict[str, Any]) -> None:
        """Record one operation durably."""
        line = json.dumps(entry, separators=(",", ":"), sort_keys=True) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as file:
            file.write(line)
            file.flush()
            os.fsync(file.fileno())

    def entries(self) -> list[dict[str, Any]]:
        """Every recorded operation, oldest first."""
        if not self.path.exists():
            return []
        with self.path.open(encoding="utf-8") as file:
            return [json.loads(line) for line in file if line.strip()]


def register(server: MCPServer[Any], settings: dict[str, Any], base_dir: Path) -> None:
    """Add the treasury tools to ``server``; ``settings["ledger"]`` names the ledger file."""
    ledger = Ledger(base_dir / settings.get("ledger", "ledger.jsonl"))

    @server.tool()
    def wire_transfer(to: str, amount: float) -> str:
        """Send ``amount`` dollars to account ``to``."""
        if amount <= 0:
            raise ValueError("amount must be positive")
        ledger.append({"op": "wire_transfer", "to": to, "amount": amount})
        return f"Transfer of ${amount:,.2f} to {to} completed."

    @server.tool(name="ledger")
    def read_ledger() -> list[dict[str, Any]]:
        """Every executed operation, oldest first."""
        return ledger.entries()

    @server.tool()
    def delete_account(account: str) -> str:
        """Close and delete an account."""
        ledger.append({"op": "delete_account", "account": account})
        return f"Account {account} deleted."

    @server.tool()
    def refund(order: str, amount: float) -> str:
        """Refund ``amount`` dollars on order ``order``."""
        ledger.append({"op": "refund", "order": order, "amount": amount})
        return f"Refunded ${amount:,.2f} on order {order}."

    @server.tool()
    def close_quarter(quarter: str) -> str:
        """Close the books of ``quarter`` (e.g. ``2026-Q3``)."""
        ledger.append({"op": "close_quarter", "quarter": quarter})
        return f"Quarter {quarter} closed."
