"""Assembly and HTTP serving of the conformance fixture server."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer

from mcp_approval.tasks import TaskMode, TaskOptions, TasksExtension, store_from_url, task_routing_middleware
from mcp_approval.testing.conformance import catalog, content, diagnostics, legacy, mrtr, tasks_fixtures
from mcp_approval.testing.conformance.events import MemoryEventStore
from mcp_approval.web.proxies import KEEP_ALIVE_S

__all__ = ["SERVER_NAME", "build_conformance_server", "run_conformance_server", "task_modes", "task_options"]

__all__ = ["HOST", "build_conformance_server", "run_conformance_server"]

SERVER_NAME = "mcp-approval-conformance"
HOST = "127.0.0.1"
MCP_PATH = "/mcp"
#: SSE ``retry`` hint (ms) for resumable 2025-era streams; short so reconnection tests stay fast.
SSE_RETRY_MS = 100

#: Fixtures that must never become tasks: the suite expects their ordinary (or MRTR) results.
_PLAIN_TOOLS: tuple[Callable[..., Any], ...] = (
    *content.CONTENT_TOOLS,
    *legacy.LEGACY_TOOLS,
    *diagnostics.DIAGNOSTIC_TOOLS,
    diagnostics.json_schema_2020_12_tool,
    *mrtr.MRTR_TOOLS,
)


def task_modes(plain: Iterable[Callable[..., Any]] = _PLAIN_TOOLS) -> Mapping[str, TaskMode]:
    """The per-tool task modes: the tasks fixtures' own, and ``forbidden`` for every other fixture."""
    modes = {fn.__name__: TaskMode.FORBIDDEN for fn in plain}
    modes.update(tasks_fixtures.TASK_MODES)
    return modes


def task_options() -> TaskOptions:
    """Tasks settings tuned for the suite: quick promotion and polling, anonymous callers allowed."""
    return TaskOptions(
        threshold_s=0.5,
        ttl_s=3600,
        poll_interval_s=0.5,
        allow_anonymous_tasks=True,
        modes=task_modes(),
    )


def build_conformance_server(store_url: str = "sqlite://") -> MCPServer[Any]:
    """Build the MCP server exposing every fixture the official conformance suite calls.

    Covers the core server scenarios of the 2025-11-25 and 2026-07-28 requirement sets (tools,
    resources, prompts, completion, logging, elicitation/sampling, MRTR) and the ``tasks-*``
    scenarios, whose fixtures run on this project's tasks extension backed by ``store_url``.
    """
    tasks = TasksExtension(task_options(), store=store_from_url(store_url))
    server: MCPServer[Any] = MCPServer(
        SERVER_NAME,
        version="1.0.0",
        instructions="Fixture server for the MCP conformance suite; not for production use.",
        tools=[diagnostics.schema_tool()],
        extensions=[tasks],
        lifespan=tasks.lifespan,
        middleware=[task_routing_middleware, tasks.listen_middleware],
    )
    for module in (content, legacy, diagnostics, mrtr, tasks_fixtures):
        module.register(server)
    catalog.register(server)
    return server


def run_conformance_server(port: int, store_url: str) -> None:
    """Serve :func:`build_conformance_server` over streamable HTTP at ``http://127.0.0.1:<port>/mcp``."""
    server = build_conformance_server(store_url)
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        event_store=MemoryEventStore(),
        retry_interval=SSE_RETRY_MS,
        host=HOST,
    )
    uvicorn.run(app, host=HOST, port=port, log_level="warning", timeout_keep_alive=KEEP_ALIVE_S)
