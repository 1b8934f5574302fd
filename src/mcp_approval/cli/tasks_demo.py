"""The tasks demo: a real server on loopback, a real MCP client over HTTP, every task path narrated."""

from __future__ import annotations

import asyncio
import json
import logging
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import uvicorn
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from rich.console import Console
from rich.table import Table

from mcp_approval.cli._terminal import markup_free
from mcp_approval.cli.preflight import shown_store_url
from mcp_approval.client import (
    CreateTaskResult,
    TaskCancelledError,
    TaskExpiredError,
    TaskFailedError,
    TaskPendingError,
    TasksClient,
)
from mcp_approval.hosts import unused_loopback_port
from mcp_approval.tasks import TaskOptions, store_from_url
from mcp_approval.testing.tasks_demo import DEMO_MODES, DEMO_TOKENS, build_tasks_demo_server
from mcp_approval.web.proxies import KEEP_ALIVE_S

__all__ = ["SCENARIOS", "Scenario", "TasksDemoResult", "print_result", "run_tasks_demo"]


@dataclass
class TasksDemoResult:
    """What one scenario did and whether it behaved."""

    scenario: str
    expected: str
    outcome: str
    ok: bool
    ms: int


@asynccontextmanager
async def _serve(db_url: str, port: int) -> Any:
    base_url = f"http://127.0.0.1:{port}"
    options = TaskOptions(
        threshold_s=0.5,
        poll_interval_s=0.1,
        modes=DEMO_MODES,
    )
    server, _ = build_tasks_demo_server(options, store=store_from_url(db_url), base_url=base_url, tokens=DEMO_TOKENS)
    config = uvicorn.Config(
        server.streamable_http_app(), host="127.0.0.1", port=port, log_level="warning", timeout_keep_alive=KEEP_ALIVE_S
    )
    web = uvicorn.Server(config)
    serving = asyncio.create_task(web.serve())
    while not web.started:
        if serving.done():
            serving.result()
        await asyncio.sleep(0.02)
    try:
        yield base_url
    finally:
        web.should_exit = True
        await serving


def _client(base_url: str, token: str, tasks: TasksClient) -> Client:
    http = httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=30)
    transport = streamable_http_client(f"{base_url}/mcp", http_client=http)
    return Client(transport, extensions=[tasks], elicitation_callback=_answer_form)


async def _answer_form(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
    """The demo's user: answers every form with the name Ada."""
    return types.ElicitResult(action="accept", content={"name": "Ada"})


Scenario = Callable[[str], Awaitable[str]]


async def _quick(base_url: str) -> str:
    async with _client(base_url, "alice-token", TasksClient()) as client:
        raw = await client.session.call_tool("slow_job", {"seconds": 0, "label": "quick"}, allow_claimed=True)
    kind = getattr(raw, "result_type", "complete")
    return "inline result" if kind == "complete" else f"unexpected {kind}"


async def _slow(base_url: str) -> str:
    tasks = TasksClient(task_wait_s=10)
    async with _client(base_url, "alice-token", tasks) as client:
        raw = await client.session.call_tool("slow_job", {"seconds": 1, "label": "report"}, allow_claimed=True)
        if not isinstance(raw, CreateTaskResult):
            return f"unexpected {type(raw).__name__}"
        result = await tasks.wait(client.session, raw.task_id, poll_interval_ms=raw.poll_interval_ms)
    return f"task → completed: {result.content[0].text}"  # type: ignore[union-attr]


async def _input(base_url: str) -> str:
    async with _client(base_url, "alice-token", TasksClient(task_wait_s=10)) as client:
        result = await client.call_tool("ask_name", {})
    return f"input_required → answered → completed: {result.content[0].text}"  # type: ignore[union-attr]


async def _tool_error(base_url: str) -> str:
    async with _client(base_url, "alice-token", TasksClient(task_wait_s=10)) as client:
        result = await client.call_tool("failing_job", {})
    return "completed with isError" if result.is_error else "completed without isError"


async def _protocol_error(base_url: str) -> str:
    async with _client(base_url, "alice-token", TasksClient(task_wait_s=10)) as client:
        try:
            await client.call_tool("protocol_error_job", {})
        except TaskFailedError as failed:
            return f"failed with error {failed.error.code if failed.error else '?'}"
        except MCPError as error:
            return f"inline error {error.code}"
    return "completed"


async def _pending_task(client: Client) -> str:
    """Start a 60 s job and return its task id once the client stops waiting for it."""
    try:
        await client.call_tool("slow_job", {"seconds": 60})
    except TaskPendingError as pending:
        return pending.task_id
    raise RuntimeError("slow_job finished while the client was still waiting")


async def _cancel(base_url: str) -> str:
    tasks = TasksClient(task_wait_s=0.6)
    async with _client(base_url, "alice-token", tasks) as client:
        task_id = await _pending_task(client)
        await tasks.cancel(client.session, task_id)
        tasks.task_wait_s = 10
        try:
            await tasks.resume(client.session, task_id)
        except TaskCancelledError:
            return "cancelled"
    return "not cancelled"


async def _foreign(base_url: str) -> str:
    owner = TasksClient(task_wait_s=0.6)
    async with _client(base_url, "alice-token", owner) as alice:
        task_id = await _pending_task(alice)
        intruder = TasksClient(task_wait_s=1)
        async with _client(base_url, "bob-token", intruder) as bob:
            try:
                await intruder.resume(bob.session, task_id)
            except TaskExpiredError:
                verdict = "unknown task (-32602) for another principal"
            else:
                verdict = "visible to another principal"
        await owner.cancel(alice.session, task_id)
    return verdict


SCENARIOS: list[tuple[str, str, Scenario]] = [
    ("quick call", "inline result", _quick),
    ("slow call", "task → completed: report finished after 1.0s", _slow),
    ("input mid-run", "input_required → answered → completed: Hello, Ada!", _input),
    ("tool error", "completed with isError", _tool_error),
    ("protocol error", "failed with error -32603", _protocol_error),
    ("cancel", "cancelled", _cancel),
    ("another principal", "unknown task (-32602) for another principal", _foreign),
]


async def run_tasks_demo(*, db_url: str | None, as_json: bool, console: Console) -> int:
    """Run every scenario; returns the exit code (0 when all behaved)."""
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="mcp-approval-demo-") as scratch:
        url = db_url or f"sqlite:///{Path(scratch) / 'tasks.db'}"
        results: list[TasksDemoResult] = []
        async with _serve(url, unused_loopback_port()) as base_url:
            if not as_json:
                where = f"server at {base_url}/mcp, store {shown_store_url(url)}"
                console.print(f"[bold]mcp-approval tasks demo[/] {markup_free(where)}")
            for name, expected, scenario in SCENARIOS:
                started = time.perf_counter()
                try:
                    outcome = await scenario(base_url)
                except Exception as exc:  # a misbehaving scenario is reported, not raised
                    outcome = f"error: {type(exc).__name__}: {exc}"
                ms = round((time.perf_counter() - started) * 1000)
                ok = outcome == expected
                results.append(TasksDemoResult(name, expected, outcome, ok, ms))
                if not as_json:
                    print_result(console, results[-1])
    if as_json:
        print(json.dumps([asdict(r) for r in results], indent=2))
    else:
        console.print(_summary(results))
    return 0 if all(r.ok for r in results) else 1


def print_result(console: Console, result: TasksDemoResult) -> None:
    """One scenario's line. Its outcome quotes what the server and client said (an error's text):
    escaped for the terminal and for rich's markup, so it is shown, never obeyed."""
    mark = "[green]✓[/]" if result.ok else "[red]✗[/]"
    console.print(f"{mark} {markup_free(result.scenario)}: {markup_free(result.outcome)} [dim]({result.ms} ms)[/]")


def _summary(results: list[TasksDemoResult]) -> Table:
    table = Table(title="tasks demo")
    for column in ("scenario", "outcome", "ms", "ok"):
        table.add_column(column)
    for r in results:
        table.add_row(markup_free(r.scenario), markup_free(r.outcome), str(r.ms), "✓" if r.ok else "✗")
    return table
