"""A small approval-gated MCP server that breaks one SEP-2848 statement on purpose (or none).

``python -m tests.checks.fixture_server --port P --flaw NAME`` serves, over Streamable HTTP at
``/mcp``, a gated ``pay(to, amount)`` tool and a ``ledger`` witness tool, for the principals of
``one-token`` and ``two-token``. Every ``pay`` call declaring tasks becomes a task that first asks
for a justification through ``input_required`` (answered with ``tasks/update``), then waits for a
decision posted to ``/decide`` (what ``fixture_decide.py`` does, as an operator's decider would).

With ``--flaw none`` it keeps every statement the kit checks; each other flaw breaks exactly one
(:data:`FLAWS` names the scenario that must fail). State lives in memory: one server per run.
"""

from __future__ import annotations

import argparse
import json
import secrets
import threading
import time
from datetime import UTC, datetime
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

#: Each flaw, and the kit scenario it breaks.
FLAWS = {
    "none": None,
    "executes-early": "requestable-denial-returns-task",
    "runs-twice": "approval-executes-at-most-once",
    "meta-only-denial": "terminal-denial-body",
    "changed-arguments": "changed-envelope-needs-approval",
    "runs-after-cancel": "cancelled-task-never-executes",
    "leaks-id": "no-backend-artifacts",
    "skips-input": "input-through-task-channel",
}
#: Breaks the expiry statement: needs ``--expire-s`` (requests lapse), so it is tested on its own.
EXPIRY_FLAW = "runs-after-expiry"
TOKENS = {"one-token": "one", "two-token": "two"}
TASKS = "io.modelcontextprotocol/tasks"
DISPOSITION = "io.modelcontextprotocol/tool-approval-disposition"
AUTHORIZATION = "io.modelcontextprotocol/authorization"
PENDING_ENVELOPE = {
    "reason": "insufficient_authorization",
    "remediation": "available",
    "remediationHints": [{"type": "task"}],
}
JUSTIFICATION = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "Why is this payment needed?",
        "requestedSchema": {
            "type": "object",
            "properties": {"justification": {"type": "string"}},
            "required": ["justification"],
        },
    },
}
TOOLS = [
    {
        "name": "pay",
        "inputSchema": {"type": "object", "properties": {"to": {"type": "string"}, "amount": {"type": "number"}}},
    },
    {"name": "ledger", "inputSchema": {"type": "object"}},
]


class Fixture:
    """The server's state: tasks, pending approval requests, the ledger, and its one flaw."""

    def __init__(self, flaw: str, expire_s: float | None = None) -> None:
        self.flaw = flaw
        self.expire_s = expire_s
        self.lock = threading.Lock()
        self.tasks: dict[str, dict[str, Any]] = {}
        self.ledger: list[dict[str, Any]] = []
        #: Approved calls, by principal and recipient (the changed-arguments flaw reuses them).
        self.grants: set[tuple[str, str]] = set()

    def execute(self, arguments: dict[str, Any]) -> None:
        self.ledger.append({"op": "pay", **arguments})

    def create(self, owner: str, arguments: dict[str, Any]) -> dict[str, Any]:
        now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        task = {
            "taskId": secrets.token_urlsafe(24),
            "owner": owner,
            "arguments": arguments,
            "status": "input_required",
            "createdAt": now,
            "request": None,
            "result": None,
            "opened": time.monotonic(),
        }
        if self.flaw == "skips-input":
            self.submit(task)
        if self.flaw == "executes-early":
            self.execute(arguments)
        self.tasks[task["taskId"]] = task
        return task

    def submit(self, task: dict[str, Any]) -> None:
        task["status"] = "working"
        task["request"] = "req-" + secrets.token_hex(8)

    def lapse(self, task: dict[str, Any]) -> None:
        """End a pending task whose request outlived ``expire_s`` as a denial (the request withdrawn)."""
        pending = task["status"] in ("working", "input_required")
        if self.expire_s is None or not pending or time.monotonic() - task["opened"] < self.expire_s:
            return
        task["status"], task["expired"] = "completed", True
        text = "The approval request expired. The tool did not run."
        meta = {
            DISPOSITION: "denied-not-executed",
            AUTHORIZATION: {"reason": "insufficient_authorization", "remediation": "unavailable"},
        }
        task["result"] = {"content": [{"type": "text", "text": text}], "isError": True, "_meta": meta}
        if self.flaw != EXPIRY_FLAW:
            task["request"] = None

    def document(self, task: dict[str, Any]) -> dict[str, Any]:
        shown = {key: task[key] for key in ("taskId", "status", "createdAt")}
        shown.update(lastUpdatedAt=task["createdAt"], ttlMs=3_600_000, pollIntervalMs=100)
        shown["statusMessage"] = "pay needs approval; it runs only if approved."
        if self.flaw == "leaks-id" and task["request"]:
            shown["statusMessage"] += f" Backend request {task['request']}."
        if task["status"] == "input_required":
            shown["inputRequests"] = {"justification": JUSTIFICATION}
        if task["status"] in ("working", "input_required"):
            shown["_meta"] = {AUTHORIZATION: PENDING_ENVELOPE}
        if task["result"] is not None:
            shown["result"] = task["result"]
        return shown

    def decide(self, decision: str, arguments: dict[str, Any]) -> str | None:
        """Decide the pending request of the call with ``arguments``; its id, or ``None`` if there is none."""
        for task in self.tasks.values():
            self.lapse(task)
            if task["arguments"] != arguments or task["request"] is None:
                continue
            if task.get("expired") and self.flaw == EXPIRY_FLAW:
                if decision == "approve":
                    self.execute(arguments)  # the flaw: the lapsed request still runs
                return str(task["request"])
            if task["status"] == "cancelled" and self.flaw == "runs-after-cancel":
                if decision == "approve":
                    self.execute(arguments)  # the flaw: the withdrawn request still runs
                return str(task["request"])
            if task["status"] != "working":
                continue
            if decision == "approve":
                if self.flaw != "executes-early":
                    self.execute(arguments)
                if self.flaw == "runs-twice":
                    self.execute(arguments)
                self.grants.add((task["owner"], str(arguments.get("to"))))
                text = "The call was approved and the tool ran once."
                task["result"] = {
                    "content": [{"type": "text", "text": text}],
                    "isError": False,
                    "_meta": {DISPOSITION: "approved-executed"},
                }
            else:
                text = (
                    "Request closed."
                    if self.flaw == "meta-only-denial"
                    else "The approval was denied. The tool did not run."
                )
                meta = {
                    DISPOSITION: "denied-not-executed",
                    AUTHORIZATION: {"reason": "insufficient_authorization", "remediation": "unavailable"},
                }
                task["result"] = {"content": [{"type": "text", "text": text}], "isError": True, "_meta": meta}
            task["status"] = "completed"
            return str(task["request"])
        return None


def rpc_error(message_id: Any, code: int, message: str, data: Any = None) -> Response:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return JSONResponse({"jsonrpc": "2.0", "id": message_id, "error": error}, status_code=400)


def app_for(fixture: Fixture) -> Starlette:
    """The fixture's HTTP application: ``/mcp`` and the operator's ``/decide``."""

    async def mcp(request: Request) -> Response:
        owner = TOKENS.get(request.headers.get("authorization", "").removeprefix("Bearer "))
        if owner is None:
            return JSONResponse({"error": "invalid_token"}, status_code=401)
        body = await request.json()
        message_id, method, params = body.get("id"), body.get("method"), body.get("params") or {}
        declared = TASKS in ((params.get("_meta") or {}).get("io.modelcontextprotocol/clientCapabilities") or {}).get(
            "extensions", {}
        )
        with fixture.lock:
            result = answer(fixture, owner, method, params, declared)
        if isinstance(result, tuple):
            return rpc_error(message_id, *result)
        return JSONResponse({"jsonrpc": "2.0", "id": message_id, "result": result})

    async def decide(request: Request) -> Response:
        body = await request.json()
        with fixture.lock:
            found = fixture.decide(body["decision"], body["arguments"])
        if found is None:
            return JSONResponse({"error": "no pending request"}, status_code=404)
        return JSONResponse({"request": found})

    return Starlette(routes=[Route("/mcp", mcp, methods=["POST"]), Route("/decide", decide, methods=["POST"])])


def answer(fixture: Fixture, owner: str, method: str, params: dict[str, Any], declared: bool) -> Any:
    """The JSON-RPC result of one request, or ``(code, message)``."""
    if method == "server/discover":
        extensions = {
            TASKS: {},
            "io.modelcontextprotocol/tool-approval": {},
            "io.modelcontextprotocol/structured-authorization-denials": {},
        }
        return {"capabilities": {"extensions": extensions, "tools": {}}, "supportedVersions": ["2026-07-28"]}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        return call(fixture, owner, params, declared)
    task = fixture.tasks.get(str(params.get("taskId")))
    if task is None or task["owner"] != owner:
        return (-32602, "Unknown or expired task")
    fixture.lapse(task)
    if method == "tasks/get":
        return fixture.document(task)
    if method == "tasks/update":
        if task["status"] == "input_required" and "justification" in (params.get("inputResponses") or {}):
            fixture.submit(task)
        return {}
    if method == "tasks/cancel":
        if task["status"] in ("working", "input_required"):
            task["status"] = "cancelled"
            if fixture.flaw != "runs-after-cancel":
                task["request"] = None  # withdrawn: a later approval finds nothing
        return {}
    return (-32601, f"Method not found: {method}")


def call(fixture: Fixture, owner: str, params: dict[str, Any], declared: bool) -> Any:
    name, arguments = params.get("name"), params.get("arguments") or {}
    if name == "ledger":
        return {
            "content": [{"type": "text", "text": json.dumps(fixture.ledger)}],
            "structuredContent": {"result": fixture.ledger},
        }
    if name != "pay":
        return {"content": [{"type": "text", "text": f"Unknown tool: {name}"}], "isError": True}
    if fixture.flaw == "changed-arguments" and (owner, str(arguments.get("to"))) in fixture.grants:
        fixture.execute(arguments)  # the flaw: an approval for this recipient covers any amount
        return {"content": [{"type": "text", "text": "Paid."}], "isError": False}
    if not declared:
        text = "pay did not run: it needs approval, which needs a client that declares tasks."
        return {"content": [{"type": "text", "text": text}], "isError": True}
    task = fixture.create(owner, arguments)
    return {"resultType": "task", **fixture.document(task)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--flaw", choices=sorted([*FLAWS, EXPIRY_FLAW]), default="none")
    parser.add_argument("--expire-s", type=float, default=None, help="requests lapse this long after they open")
    options = parser.parse_args()
    uvicorn.run(
        app_for(Fixture(options.flaw, options.expire_s)), host="127.0.0.1", port=options.port, log_level="warning"
    )


if __name__ == "__main__":
    main()
