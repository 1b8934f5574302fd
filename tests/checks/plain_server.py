"""A plain MCP server (the official SDK's ``MCPServer``, no approval at all) with a ``pay`` tool.

``python -m tests.checks.plain_server --port P --ledger FILE``: each ``pay`` call appends
``{"tool": "pay", "arguments": ...}`` to FILE (one JSON line, the side effect the test counts);
``ledger`` lists them. The kit, told ``pay`` is gated, must run it at most once here.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer


def build(ledger: Path) -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer("plain")

    def entries() -> list[dict[str, Any]]:
        return [json.loads(line) for line in ledger.read_text().splitlines()] if ledger.exists() else []

    @server.tool()
    def pay(to: str, amount: float) -> str:
        """Send ``amount`` to ``to`` (no approval asked)."""
        with ledger.open("a", encoding="utf-8") as file:
            file.write(json.dumps({"tool": "pay", "arguments": {"to": to, "amount": amount}}) + "\n")
        return f"Paid {amount} to {to}."

    @server.tool(name="ledger")
    def read_ledger() -> list[dict[str, Any]]:
        """Every payment made."""
        return entries()

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ledger", type=Path, required=True)
    options = parser.parse_args()
    app = build(options.ledger).streamable_http_app(json_response=True)
    uvicorn.run(app, host="127.0.0.1", port=options.port, log_level="warning")


if __name__ == "__main__":
    main()
