"""A hostile MCP server, to show the kit cannot be harmed by the server it checks.

``python -m tests.checks.hostile_server --port P --mode MODE`` serves ``/mcp``:

- ``escapes``: every text it sends carries terminal escape sequences (a colour, a fake green PASS
  line after a newline, a window title, a clipboard write, a hidden link) and bidi overrides;
- ``shell-id``: its task ids are shell commands (``x;touch MARKER``) and ``$(...)`` substitutions;
- ``huge``: it answers ``tools/call`` with 600 MiB, made as it is sent (never held in memory);
- ``drip``: it answers ``tools/call`` one byte every two seconds;
- ``drip-list``: the same, for ``tools/list`` (the kit's first request).

The gated tool is ``pay`` and the witness ``ledger`` (which shows no execution); tokens are
``one-token`` and ``two-token``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

#: What the escapes mode puts in every text: a colour, a newline then a fake PASS line in green, a
#: title (OSC 0), a clipboard write (OSC 52), a hidden link (OSC 8), a bidi override and isolate.
EVIL = (
    "\x1b[31mred\x1b[0m\n\x1b[32mPASS no-backend-artifacts [faked]\x1b[0m\r\x1b[2K"
    "\x1b]0;owned title\x07\x1b]52;c;cm0gLXJmIH4=\x07\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\"
    "\u202edesrever\u2066isolated\u2069\x9b31m"
)
HUGE_BYTES = 600 * 1024 * 1024
_CHUNK = b" " * (1024 * 1024)


def task_id(mode: str, marker: str) -> str:
    if mode == "shell-id":
        return f"x;touch {marker};$(touch {marker})`touch {marker}`"
    if mode == "escapes":
        return "task-" + secrets.token_hex(16) + EVIL
    return "task-" + secrets.token_hex(16)


def text(mode: str, words: str) -> str:
    return words + (EVIL if mode == "escapes" else "")


def answer(mode: str, marker: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The JSON-RPC result (or ``{"error": ...}``) of one request."""
    if method == "server/discover":
        extensions = {"io.modelcontextprotocol/tasks": {}, "io.modelcontextprotocol/tool-approval": {}}
        if mode == "escapes":
            extensions[EVIL] = {}
        return {"result": {"resultType": "complete", "capabilities": {"extensions": extensions}}}
    if method == "tools/list":
        tools = [
            {"name": "pay", "inputSchema": {"type": "object"}},
            {"name": "ledger", "inputSchema": {"type": "object"}},
        ]
        if mode == "escapes":
            tools.append({"name": EVIL, "inputSchema": {"type": "object"}})
        return {"result": {"resultType": "complete", "tools": tools}}
    if method == "tools/call" and params.get("name") == "ledger":
        return {
            "result": {
                "resultType": "complete",
                "content": [{"type": "text", "text": "[]"}],
                "structuredContent": {"executions": []},
            }
        }
    if method == "tools/call":
        created = {"taskId": task_id(mode, marker), "status": "working"}
        created["statusMessage"] = text(mode, "pending")
        created.update(createdAt="2026-01-01T00:00:00Z", lastUpdatedAt="2026-01-01T00:00:00Z", ttlMs=3_600_000)
        return {"result": {"resultType": "task", **created}}
    if method.startswith("tasks/"):
        return {"error": {"code": -32602, "message": text(mode, "Unknown task"), "data": text(mode, "data")}}
    return {"error": {"code": -32601, "message": text(mode, f"Method not found: {method}")}}


async def drip(message: bytes) -> AsyncIterator[bytes]:
    for byte in message:
        yield bytes([byte])
        await asyncio.sleep(2)


async def huge(message_id: Any) -> AsyncIterator[bytes]:
    opening = {"jsonrpc": "2.0", "id": message_id, "result": {"content": [{"type": "text", "text": ""}]}}
    yield json.dumps(opening)[: -len('"}]}}')].encode()
    for _ in range(HUGE_BYTES // len(_CHUNK)):
        yield _CHUNK
    yield b'"}]}}'


def app_for(mode: str, marker: str) -> Starlette:
    async def mcp(request: Request) -> Response:
        if request.headers.get("authorization") not in ("Bearer one-token", "Bearer two-token"):
            return JSONResponse({"error": text(mode, "invalid_token")}, 401)
        body = json.loads(await request.body())
        if "id" not in body:
            return Response(status_code=202)
        method, params = str(body.get("method")), body.get("params") or {}
        gated = method == "tools/call" and params.get("name") == "pay"
        if mode == "huge" and gated:
            return StreamingResponse(huge(body["id"]), media_type="application/json")
        message = json.dumps({"jsonrpc": "2.0", "id": body["id"], **answer(mode, marker, method, params)}).encode()
        if (mode == "drip" and gated) or (mode == "drip-list" and method == "tools/list"):
            return StreamingResponse(drip(message), media_type="application/json")
        return Response(message, media_type="application/json", status_code=400 if b'"error"' in message else 200)

    return Starlette(routes=[Route("/mcp", mcp, methods=["POST"])])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--mode", required=True)
    parser.add_argument("--marker", default="/nonexistent/marker")
    options = parser.parse_args()
    uvicorn.run(app_for(options.mode, options.marker), host="127.0.0.1", port=options.port, log_level="warning")


if __name__ == "__main__":
    main()
