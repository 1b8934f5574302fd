"""Raw JSON-RPC over streamable HTTP, so tests control every header and ``_meta`` member."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx

PROTOCOL = "2026-07-28"
LEGACY_PROTOCOL = "2025-11-25"
TASKS = "io.modelcontextprotocol/tasks"


def envelope(*, tasks: bool = True, elicitation: bool = True, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The per-request ``_meta`` envelope a 2026-07-28 client sends."""
    capabilities: dict[str, Any] = {}
    if tasks:
        capabilities["extensions"] = {TASKS: {}}
    if elicitation:
        capabilities["elicitation"] = {"form": {}, "url": {}}
    meta = {
        "io.modelcontextprotocol/protocolVersion": PROTOCOL,
        "io.modelcontextprotocol/clientInfo": {"name": "tests", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }
    meta.update(extra or {})
    return meta


@dataclass
class Reply:
    """One HTTP answer: its status and the JSON-RPC ``result`` or ``error``."""

    status: int
    body: dict[str, Any]

    @property
    def result(self) -> dict[str, Any]:
        assert "result" in self.body, f"expected a result, got {self.body}"
        return self.body["result"]  # type: ignore[no-any-return]

    @property
    def error(self) -> dict[str, Any]:
        assert "error" in self.body, f"expected an error, got {self.body}"
        return self.body["error"]  # type: ignore[no-any-return]

    @property
    def retry_after_s(self) -> float | None:
        """For a "store busy, try again" answer (``error.data.retryAfterMs``), the seconds to wait; else ``None``."""
        data = self.body.get("error", {}).get("data")
        return data["retryAfterMs"] / 1000 if isinstance(data, dict) and "retryAfterMs" in data else None


async def until_served(send: Callable[[], Awaitable[Reply]]) -> Reply:
    """``send()`` again, as a client told to, while the answer is that the store is busy; the first other answer.

    An overloaded server (a burst of calls on a busy machine) may answer some calls that way instead
    of serving them; the wait between tries is the one the answer asks for.
    """
    reply = await send()
    while (retry_after_s := reply.retry_after_s) is not None:
        await asyncio.sleep(retry_after_s)  # the server's own "try again in N s"
        reply = await send()
    return reply


class Wire:
    """Sends JSON-RPC requests to ``/mcp`` with the 2026-07-28 routing headers."""

    def __init__(self, http: httpx.AsyncClient, *, token: str | None = None) -> None:
        self.http = http
        self.token = token
        self._ids = itertools.count(1)

    def as_principal(self, token: str | None) -> Wire:
        """The same connection, authenticated as another principal."""
        return Wire(self.http, token=token)

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        meta: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        name: str | None = None,
    ) -> Reply:
        params = dict(params or {})
        params.setdefault("_meta", meta if meta is not None else envelope())
        sent_headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "mcp-protocol-version": PROTOCOL,
            "mcp-method": method,
        }
        routing_name = name if name is not None else params.get("taskId", params.get("name"))
        if isinstance(routing_name, str):
            sent_headers["mcp-name"] = routing_name
        if self.token:
            sent_headers["authorization"] = f"Bearer {self.token}"
        sent_headers.update(headers or {})
        for key in [k for k, v in sent_headers.items() if v == ""]:
            del sent_headers[key]
        payload = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
        response = await self.http.post("/mcp", content=json.dumps(payload), headers=sent_headers)
        return Reply(response.status_code, _decode(response))

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None, **kwargs: Any) -> Reply:
        return await self.request("tools/call", {"name": name, "arguments": arguments or {}}, **kwargs)

    async def get(self, task_id: str, **kwargs: Any) -> Reply:
        return await self.request("tasks/get", {"taskId": task_id}, **kwargs)

    async def update(self, task_id: str, responses: dict[str, Any], **kwargs: Any) -> Reply:
        return await self.request("tasks/update", {"taskId": task_id, "inputResponses": responses}, **kwargs)

    async def cancel(self, task_id: str, **kwargs: Any) -> Reply:
        return await self.request("tasks/cancel", {"taskId": task_id}, **kwargs)


class LegacySession:
    """A 2025-11-25 client over streamable HTTP: ``initialize`` (declaring URL elicitation), then calls."""

    def __init__(self, http: httpx.AsyncClient, headers: dict[str, str]) -> None:
        self.http = http
        self.headers = headers
        self._ids = itertools.count(2)

    @classmethod
    async def open(
        cls, http: httpx.AsyncClient, token: str, capabilities: dict[str, Any] | None = None
    ) -> LegacySession:
        """Initialize a session as the bearer of ``token`` (by default declaring ``elicitation.url``)."""
        headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "authorization": f"Bearer {token}",
        }
        params = {
            "protocolVersion": LEGACY_PROTOCOL,
            "capabilities": capabilities if capabilities is not None else {"elicitation": {"url": {}}},
            "clientInfo": {"name": "tests-legacy", "version": "1"},
        }
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
        response = await http.post("/mcp", content=json.dumps(initialize), headers=headers)
        assert response.status_code == 200, response.text
        assert _decode(response)["result"]["protocolVersion"] == LEGACY_PROTOCOL
        headers = {**headers, "mcp-protocol-version": LEGACY_PROTOCOL}
        if "mcp-session-id" in response.headers:
            headers["mcp-session-id"] = response.headers["mcp-session-id"]
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await http.post("/mcp", content=json.dumps(initialized), headers=headers)
        return cls(http, headers)

    async def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The JSON-RPC response (``result`` or ``error``) of one ``tools/call``."""
        payload = {
            "jsonrpc": "2.0",
            "id": next(self._ids),
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
        response = await self.http.post("/mcp", content=json.dumps(payload), headers=self.headers)
        return _decode(response)


def _decode(response: httpx.Response) -> dict[str, Any]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in response.text.splitlines():
            if line.startswith("data:"):
                message = json.loads(line[5:])
                if "id" in message:
                    return message  # type: ignore[no-any-return]
        raise AssertionError(f"no response in event stream: {response.text!r}")
    if not response.content:
        return {}
    return response.json()  # type: ignore[no-any-return]
