"""Clients for ``mcp-approval check-client``: ``python -m tests.checks.client_runs URL MODE``.

``tasks``: this project's client, declaring tasks and answering input through its input handler.
``none``: the same client without tasks. ``payees``: the same client without tasks paying two
different accounts (two calls, neither a retry). ``careless``: raw JSON-RPC that breaks the client
statements on purpose (no ``Mcp-Name``, polls without waiting, answers twice, calls again the same
call with its arguments in another order, then with a changed amount).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import httpx

from mcp_approval.client import mcp_client
from tests.support.timing import scaled

ARGUMENTS = {"to": "acct-1", "amount": 100}
ANSWER = {"action": "accept", "content": {"justification": "Invoice 7"}}


async def sdk_client(url: str, *, tasks: bool, payees: tuple[str, ...] = ("acct-1",)) -> None:
    async def answer(request: Any) -> dict[str, Any]:
        return ANSWER

    async with mcp_client(url, tasks=tasks, input_handler=answer, task_wait_s=scaled(30)) as client:
        for payee in payees:
            result = await client.call_tool("transfer", {**ARGUMENTS, "to": payee})
            print(result.is_error, result.content[0].text if result.content else "")


async def careless(url: str) -> None:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
    }
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(timeout=scaled(10)) as http:

        async def send(method: str, params: dict[str, Any]) -> dict[str, Any]:
            body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
            reply = await http.post(url, content=json.dumps(body), headers=headers)
            return dict(reply.json().get("result") or {})

        created = await send("tools/call", {"name": "transfer", "arguments": ARGUMENTS})
        task_id = created["taskId"]
        for _ in range(2):  # the same answer twice
            await send("tasks/update", {"taskId": task_id, "inputResponses": {"justification": ANSWER}})
        # The same call again (its keys in another order, its amount spelled 100.0): a second task for it.
        await send("tools/call", {"name": "transfer", "arguments": {"amount": 100.0, "to": "acct-1"}})
        # A changed amount: a new call of its own, which the harness flags as such.
        await send("tools/call", {"name": "transfer", "arguments": {"to": "acct-1", "amount": 250}})
        while (await send("tasks/get", {"taskId": task_id}))["status"] != "completed":
            pass  # no pause: pollIntervalMs is ignored


def main() -> None:
    url, mode = sys.argv[1], sys.argv[2]
    if mode == "careless":
        asyncio.run(careless(url))
    elif mode == "payees":
        asyncio.run(sdk_client(url, tasks=False, payees=("acct-1", "acct-2")))
    else:
        asyncio.run(sdk_client(url, tasks=mode == "tasks"))


if __name__ == "__main__":
    main()
