"""The SEP server's HTTP side: JSON-RPC over Streamable HTTP per instance, and the operator's endpoints."""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import secrets
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.checks.sep_server import (
    APPROVAL,
    CAPABILITIES,
    CONTEXT_ID,
    DENIALS,
    ENVELOPE,
    FORM,
    PENDING,
    PRINCIPALS,
    TASKS,
    TERMINAL,
    UNDERSCOPED,
    Challenge,
    Instance,
    RpcError,
    Settings,
    canonical,
)

TOOLS = [
    {
        "name": "pay",
        "inputSchema": {"type": "object", "properties": {"to": {"type": "string"}, "amount": {"type": "number"}}},
    },
    {"name": "ledger", "inputSchema": {"type": "object"}},
]
LEGACY = "2025-11-25"
SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"
INSTANCES: dict[str, Instance] = {}


def declared(instance: Instance, params: dict[str, Any], legacy: bool) -> bool:
    """Whether this request declared the tasks extension (per request; never on a legacy connection)."""
    if legacy:
        return instance.m == "legacy-connection-task"
    meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
    capabilities = meta.get(CAPABILITIES) if isinstance(meta.get(CAPABILITIES), dict) else {}
    if instance.m == "legacy-capability-declares" and "tasks" in capabilities:
        return True
    return TASKS in (capabilities.get("extensions") or {})


def missing(instance: Instance) -> RpcError:
    code = instance.settings.missing_capability
    return RpcError(code, "Missing required client capability", {"requiredCapabilities": {"extensions": {TASKS: {}}}})


def tool_result(text: str, *, error: bool, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"resultType": "complete", "content": [{"type": "text", "text": text}], "isError": error}
    if meta:
        result["_meta"] = meta
    return result


def call(instance: Instance, owner: str, params: dict[str, Any], legacy: bool, message_id: Any) -> dict[str, Any]:
    name, arguments = params.get("name"), params.get("arguments") or {}
    if name == "ledger":
        shown = json.dumps(instance.ledger)
        return {**tool_result(shown, error=False), "structuredContent": {"executions": instance.ledger}}
    if name != "pay" or not isinstance(arguments, dict):
        return tool_result(f"Unknown tool: {name}", error=True)
    if owner == UNDERSCOPED:
        scope = "" if instance.m == "bare-403" else 'error="insufficient_scope", scope="payments", '
        raise Challenge(403, f'Bearer {scope}resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource"')
    meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
    if instance.m == "context-id-authorizes" and meta.get(CONTEXT_ID) in instance.contexts:
        return tool_result(instance.execute(arguments)["text"], error=False)
    if instance.m in ("standing-grant", "approval-covers-recipient") and covered(instance, owner, arguments):
        return tool_result(instance.execute(arguments)["text"], error=False)
    verdict = instance.evaluate(owner, arguments, approved=False)
    tasks = declared(instance, params, legacy)
    if verdict == "allow":
        return tool_result(instance.execute(arguments)["text"], error=False)
    if verdict == "deny" and not (instance.m == "non-requestable-becomes-task" and tasks):
        envelope = {ENVELOPE: instance.envelope("unavailable", hints=False)} if instance.settings.denials else None
        return tool_result(instance.words.denied, error=True, meta=envelope)
    if not tasks and instance.m != "no-tasks-gets-task":
        if url_declared(params) or instance.m == "url-to-undeclared":
            return url_round(instance, owner, params, arguments)
        return degraded(instance, owner, arguments)
    if instance.settings.inputs == "before" and instance.m != "skips-input":
        round_or_error = input_round(instance, owner, params, arguments)
        if round_or_error is not None:
            return round_or_error
    same = [
        t for t in instance.tasks.values() if t.status in PENDING and canonical(t.arguments) == canonical(arguments)
    ]
    existing = [t for t in same if t.owner == owner or instance.m == "dedup-ignores-principal"]
    task = existing[0] if existing else instance.create(owner, arguments)
    instance.created_by[(owner, message_id)] = task.task_id
    if instance.m == "not-readable-at-once":
        instance.hidden.add(task.task_id)
    return instance.created_view(task)


def covered(instance: Instance, owner: str, arguments: dict[str, Any]) -> bool:
    """For the two mutants that treat an approval as a grant: an earlier approved call that covers this one."""
    for task in instance.tasks.values():
        if task.owner != owner or not task.claimed:
            continue
        if instance.m == "standing-grant" and canonical(task.arguments) == canonical(arguments):
            return True
        if instance.m == "approval-covers-recipient" and task.arguments.get("to") == arguments.get("to"):
            return True
    return False


def degraded(instance: Instance, owner: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A client without tasks: -32021 (or -32003), or the degraded isError result with guidance."""
    if instance.settings.missing_capability != -32021:
        raise missing(instance)
    if instance.m == "no-tasks-wrong-code":
        raise RpcError(-32602, "This call needs the tasks extension")
    if not instance.settings.denials:
        return tool_result(instance.words.degraded, error=True)
    handle = "ctx-" + secrets.token_urlsafe(12)
    instance.contexts[handle] = owner
    remediation = "unavailable" if instance.m == "no-tasks-unavailable" else "undisclosed"
    envelope = {**instance.envelope(remediation, hints=False), "authorizationContextId": handle}
    return tool_result(instance.words.degraded, error=True, meta={ENVELOPE: envelope})


def url_declared(params: dict[str, Any]) -> bool:
    meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
    capabilities = meta.get(CAPABILITIES) if isinstance(meta.get(CAPABILITIES), dict) else {}
    elicitation = capabilities.get("elicitation")
    return isinstance(elicitation, dict) and "url" in elicitation


def url_round(instance: Instance, owner: str, params: dict[str, Any], arguments: dict[str, Any]) -> dict[str, Any]:
    """SEP-2643 use case 1: the user approves at a URL; the retry with the state resumes the call."""
    state = params.get("requestState")
    if state is not None:
        if not instance.bound(state, owner, arguments):
            raise RpcError(-32602, "requestState does not match this call")
        return tool_result(instance.words.degraded, error=True)  # not approved (yet): nothing ran
    link = {
        "method": "elicitation/create",
        "params": {
            "mode": "url",
            "message": "Approve the payment here.",
            "url": "https://approvals.example/pay/" + secrets.token_hex(8),
        },
    }
    hints = [] if instance.m == "url-without-hint" else [{"type": "url"}]
    envelope = {"reason": "insufficient_authorization", "remediation": "available", "remediationHints": hints}
    answer: dict[str, Any] = {"resultType": "input_required", "inputRequests": {"approve": link}}
    answer["requestState"] = instance.binding(owner, arguments)
    if instance.settings.denials:
        answer["_meta"] = {ENVELOPE: envelope}
    return answer


def input_round(instance: Instance, owner: str, params: dict[str, Any], arguments: dict[str, Any]) -> Any:
    """The input round before the task (SEP-2322): asked first, then the retry checked against its binding."""
    state = params.get("requestState")
    answers = params.get("inputResponses") if isinstance(params.get("inputResponses"), dict) else {}
    if state is None or "reason" not in answers:
        return {
            "resultType": "input_required",
            "inputRequests": {"reason": FORM},
            "requestState": instance.binding(owner, arguments),
        }
    if not instance.bound(state, owner, arguments):
        raise RpcError(-32602, "requestState does not match this call")
    return None


def task_method(
    instance: Instance, owner: str, method: str, params: dict[str, Any], mcp_name: str | None, legacy: bool
) -> dict[str, Any]:
    if legacy:
        raise RpcError(-32601, f"Method not found: {method}")
    if not declared(instance, params, legacy) and instance.m != "undeclared-tasks-served":
        raise missing(instance)
    task_id = str(params.get("taskId"))
    if decode_name(mcp_name) != task_id and instance.m != "mcp-name-unchecked":
        raise RpcError(-32020, "Mcp-Name does not match params.taskId")
    task = instance.tasks.get(task_id)
    foreign_ok = (
        instance.m == "completed-readable-by-other"
        and method == "tasks/get"
        and task is not None
        and task.status in TERMINAL
    ) or (instance.m == "update-from-other-accepted" and method == "tasks/update")
    if task is None or (task.owner != owner and not foreign_ok) or task_id in instance.hidden:
        instance.hidden.discard(task_id)
        if instance.m == "unknown-task-method-not-found":
            raise RpcError(-32601, "Method not found")
        raise RpcError(-32602, "Unknown or expired task")
    if method == "tasks/get":
        return {
            **instance.document(task, read=True),
            "resultType": "task" if instance.m == "get-result-type-task" else "complete",
        }
    if method == "tasks/update":
        answered = params.get("inputResponses") if isinstance(params.get("inputResponses"), dict) else {}
        if task.status == "input_required" and set(task.asked) & set(answered):
            task.asked = [key for key in task.asked if key not in answered]
            if not task.asked:
                instance.submit(task)
        return {"resultType": "complete", **(instance.document(task) if instance.m == "update-ack-with-task" else {})}
    if task.status in PENDING or (instance.m == "cancel-ends-completed" and task.status == "completed"):
        task.status = "cancelled"
        task.request = task.request if instance.m == "runs-after-cancel" else None
        instance.touch(task)
    return {"resultType": "complete", **(instance.document(task) if instance.m == "cancel-ack-with-task" else {})}


def decode_name(value: str | None) -> str | None:
    """An ``Mcp-Name`` header value, its ``=?base64?...?=`` form decoded (SEP-2243)."""
    if value is None or not (value.startswith("=?base64?") and value.endswith("?=")):
        return value
    try:
        return base64.b64decode(value[9:-2], validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None


def dispatch(
    instance: Instance, owner: str, method: str, params: dict[str, Any], request: Request, message_id: Any
) -> dict[str, Any]:
    legacy = request.headers.get("mcp-protocol-version") == LEGACY
    if method == "initialize":
        return {
            "protocolVersion": LEGACY,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "sep-server", "version": "1"},
        }
    if method == "server/discover":
        extensions: dict[str, Any] = {TASKS: {}}
        if instance.m != "no-approval-extension":
            extensions[APPROVAL] = {}
        if instance.settings.denials:
            extensions[DENIALS] = {}
        capabilities = {"tools": {}, "extensions": extensions}
        return {"resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": capabilities}
    if method == "tools/list":
        return {"resultType": "complete", "tools": TOOLS}
    if method == "tools/call":
        return call(instance, owner, params, legacy, message_id)
    if method in ("tasks/get", "tasks/update", "tasks/cancel"):
        return task_method(instance, owner, method, params, request.headers.get("mcp-name"), legacy)
    if method == "tasks/list" and instance.m == "tasks-list-served":
        return {"resultType": "complete", "tasks": []}
    raise RpcError(-32601, f"Method not found: {method}")


async def mcp(request: Request) -> Response:
    instance = INSTANCES.get(request.path_params["instance"])
    if instance is None:
        return Response(status_code=404)
    owner = PRINCIPALS.get(request.headers.get("authorization", "").removeprefix("Bearer "))
    if owner is None or owner in instance.revoked:
        return JSONResponse({"error": "invalid_token"}, 401, {"www-authenticate": 'Bearer error="invalid_token"'})
    try:
        body = json.loads(await request.body())
    except ValueError:
        return JSONResponse({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}, 400)
    method, params = body.get("method"), body.get("params") if isinstance(body.get("params"), dict) else {}
    if "id" not in body:
        if method == "notifications/cancelled" and instance.m == "cancelled-notification-cancels":
            task = instance.tasks.get(str(instance.created_by.get((owner, params.get("requestId")))))
            if task is not None and task.status in PENDING:
                task.status, task.request = "cancelled", None
        return Response(status_code=202)
    if method == "subscriptions/listen":
        return await listen(instance, owner, body["id"], params, request)
    try:
        result = dispatch(instance, owner, str(method), params, request, body["id"])
    except Challenge as exc:
        return JSONResponse({"error": "insufficient_scope"}, exc.status, {"www-authenticate": exc.header})
    except RpcError as exc:
        error: dict[str, Any] = {"code": exc.code, "message": exc.message}
        if exc.data is not None:
            error["data"] = exc.data
        return JSONResponse({"jsonrpc": "2.0", "id": body["id"], "error": error}, 400)
    return JSONResponse({"jsonrpc": "2.0", "id": body["id"], "result": result})


async def listen(instance: Instance, owner: str, listen_id: Any, params: dict[str, Any], request: Request) -> Response:
    """``subscriptions/listen`` for ``taskIds``: the acknowledgement, then ``notifications/tasks``."""
    asked = (params.get("notifications") or {}).get("taskIds") or []
    if instance.settings.listen == "off":
        return JSONResponse(
            {"jsonrpc": "2.0", "id": listen_id, "error": {"code": -32601, "message": "Method not found"}}, 400
        )
    if asked and not declared(instance, params, False) and instance.m != "listen-undeclared-accepted":
        error = missing(instance)
        return JSONResponse(
            {"jsonrpc": "2.0", "id": listen_id, "error": {"code": error.code, "message": error.message}}, 400
        )
    owned = [
        i
        for i in asked
        if i in instance.tasks and (instance.tasks[i].owner == owner or instance.m == "listen-acks-foreign-ids")
    ]
    agreed = [] if instance.settings.listen == "none" else owned
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    entry = (owner, set(agreed), queue)
    instance.listeners.append(entry)

    async def frames() -> AsyncIterator[bytes]:
        try:
            ack = {"_meta": {SUBSCRIPTION: listen_id}, "notifications": {"taskIds": agreed}}
            yield _event({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": ack})
            while not await request.is_disconnected():
                try:
                    view = await asyncio.wait_for(queue.get(), 0.2)
                except TimeoutError:
                    continue
                view["_meta"] = {**(view.get("_meta") or {}), SUBSCRIPTION: listen_id}
                yield _event({"jsonrpc": "2.0", "method": "notifications/tasks", "params": view})
        finally:
            instance.listeners.remove(entry)

    return StreamingResponse(frames(), media_type="text/event-stream")


def _event(message: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(message)}\n\n".encode()


async def create_instance(request: Request) -> Response:
    settings = Settings.from_json(await request.json())
    instance_id = secrets.token_hex(6)
    INSTANCES[instance_id] = Instance(settings)
    return JSONResponse({"id": instance_id})


async def decide(request: Request) -> Response:
    instance = INSTANCES[request.path_params["instance"]]
    body = await request.json()
    found = instance.decide(body["decision"], body["arguments"], body.get("reviewer", ""), body.get("comment", ""))
    return JSONResponse({"request": found}) if found else JSONResponse({"error": "no pending request"}, 404)


async def policy(request: Request) -> Response:
    instance = INSTANCES[request.path_params["instance"]]
    body = await request.json()
    if body["action"] == "deny-call":
        instance.denied_calls.add(canonical(body["arguments"]))
    elif body["action"] == "revoke-principal":
        instance.revoked.add(PRINCIPALS[body["token"]])
    else:
        instance.denied_calls.clear()
        instance.revoked.clear()
    return JSONResponse({"action": body["action"]})


def app() -> Starlette:
    return Starlette(
        routes=[
            Route("/instances", create_instance, methods=["POST"]),
            Route("/i/{instance}/mcp", mcp, methods=["POST"]),
            Route("/i/{instance}/decide", decide, methods=["POST"]),
            Route("/i/{instance}/policy", policy, methods=["POST"]),
        ]
    )


def serve(port: int) -> None:
    uvicorn.run(app(), host="127.0.0.1", port=port, log_level="warning")
