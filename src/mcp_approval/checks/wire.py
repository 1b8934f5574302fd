"""JSON-RPC over Streamable HTTP as a 2026-07-28 client, keeping everything the server answered.

The kit must see the wire as any client does, so it builds requests itself (the per-request
``_meta`` envelope, the routing headers) and keeps every answer for the artifact scenario.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any

import httpx2

from mcp_approval.protocol import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    PROTOCOL_VERSION_2026,
    TASKS_EXTENSION,
)

__all__ = ["Answer", "Wire", "envelope_meta", "request_headers"]


def envelope_meta(*, tasks: bool) -> dict[str, Any]:
    """The per-request ``_meta`` envelope of a 2026-07-28 client (declaring tasks, or not)."""
    capabilities: dict[str, Any] = {"elicitation": {"form": {}}}
    if tasks:
        capabilities["extensions"] = {TASKS_EXTENSION: {}}
    return {
        META_PROTOCOL_VERSION: PROTOCOL_VERSION_2026,
        META_CLIENT_INFO: {"name": "mcp-approval-check", "version": "1"},
        META_CLIENT_CAPABILITIES: capabilities,
    }


def request_headers(method: str, token: str) -> dict[str, str]:
    """The HTTP headers of one request (``mcp-name`` is added by the caller when there is a name)."""
    return {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": PROTOCOL_VERSION_2026,
        "mcp-method": method,
        "authorization": f"Bearer {token}",
    }


@dataclass(frozen=True)
class Answer:
    """One HTTP answer: its status and the JSON-RPC ``result`` or ``error`` (``None`` when absent)."""

    status: int
    result: dict[str, Any] | None
    error: dict[str, Any] | None
    text: str

    def brief(self) -> str:
        """The answer in one line, for evidence."""
        if self.error is not None:
            return f"HTTP {self.status} error {self.error.get('code')}: {self.error.get('message')}"
        if self.result is None:
            return f"HTTP {self.status}: {self.text[:160]}"
        shown = {key: self.result[key] for key in ("resultType", "status", "isError", "taskId") if key in self.result}
        return f"HTTP {self.status} {json.dumps(shown)}"


class Wire:
    """Requests to one MCP endpoint as the bearer of one token."""

    def __init__(self, http: httpx2.AsyncClient, url: str, token: str, seen: list[str]) -> None:
        self.http = http
        self.url = url
        self.token = token
        #: The text of every answer of the run (shared by both principals' wires).
        self.seen = seen
        self._ids = itertools.count(1)

    async def request(self, method: str, params: dict[str, Any] | None = None, *, tasks: bool = True) -> Answer:
        """Send one request; ``tasks`` says whether the client declares the tasks extension."""
        body = dict(params or {})
        body["_meta"] = envelope_meta(tasks=tasks)
        headers = request_headers(method, self.token)
        name = body.get("taskId", body.get("name"))
        if isinstance(name, str):
            headers["mcp-name"] = name
        payload = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": body}
        response = await self.http.post(self.url, content=json.dumps(payload), headers=headers)
        self.seen.append(response.text)
        message = _message(response)
        result = message.get("result")
        error = message.get("error")
        return Answer(
            response.status_code,
            result if isinstance(result, dict) else None,
            error if isinstance(error, dict) else None,
            response.text,
        )

    async def call(self, tool: str, arguments: dict[str, Any], *, tasks: bool = True, **extra: Any) -> Answer:
        """``tools/call``; ``extra`` adds params (``requestState``, ``inputResponses``)."""
        return await self.request("tools/call", {"name": tool, "arguments": arguments, **extra}, tasks=tasks)

    async def get(self, task_id: str) -> Answer:
        """``tasks/get``."""
        return await self.request("tasks/get", {"taskId": task_id})

    async def cancel(self, task_id: str) -> Answer:
        """``tasks/cancel``."""
        return await self.request("tasks/cancel", {"taskId": task_id})

    async def update(self, task_id: str, responses: dict[str, Any]) -> Answer:
        """``tasks/update`` with ``inputResponses``."""
        return await self.request("tasks/update", {"taskId": task_id, "inputResponses": responses})


def _message(response: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC response in a JSON body or an event stream (``{}`` when there is none)."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in response.text.splitlines():
            if line.startswith("data:"):
                try:
                    message = json.loads(line[5:])
                except json.JSONDecodeError:
                    continue
                if isinstance(message, dict) and "id" in message:
                    return message
        return {}
    try:
        message = json.loads(response.text)
    except json.JSONDecodeError:
        return {}
    return message if isinstance(message, dict) else {}
