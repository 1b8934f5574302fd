"""A small server whose tools exercise every path of the tasks runtime.

Used by the tasks demo, by tests that need a real server process, and by the benchmark::

    python -m mcp_approval.testing.tasks_demo --port 8000 --db sqlite:///tasks.db --tokens
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError

from mcp_approval.clock import Clock
from mcp_approval.server.auth import StaticTokenVerifier, local_auth_settings
from mcp_approval.tasks import (
    TaskMode,
    TaskOptions,
    TasksExtension,
    TaskSignals,
    TaskStore,
    current_task,
    store_from_url,
    task_routing_middleware,
)
from mcp_approval.web.proxies import KEEP_ALIVE_S

__all__ = ["DEMO_MODES", "DEMO_TOKENS", "build_tasks_demo_server", "main"]

logger = logging.getLogger("mcp_approval.tasks_demo")

#: Tokens of the demo principals.
DEMO_TOKENS = {"alice-token": "alice", "bob-token": "bob"}

#: Task modes of the demo tools; unlisted tools are optional.
DEMO_MODES = {
    "echo": TaskMode.FORBIDDEN,
    "required_job": TaskMode.REQUIRED,
    "protocol_error_job": TaskMode.REQUIRED,
    "failing_job": TaskMode.REQUIRED,
}


def build_tasks_demo_server(
    options: TaskOptions,
    *,
    store: TaskStore | None = None,
    base_url: str | None = None,
    tokens: dict[str, str] | None = None,
    clock: Clock | None = None,
    signals: TaskSignals | None = None,
) -> tuple[MCPServer[Any], TasksExtension]:
    """A server with the demo tools on ``store`` (by default a private SQLite database); ``tokens``
    (with ``base_url``) turns on bearer authentication; ``signals`` replaces the store's own change signals."""
    tasks = TasksExtension(options, store=store, clock=clock, signals=signals)
    auth: dict[str, Any] = {}
    if tokens:
        if base_url is None:
            raise ValueError("tokens need the server's base_url")
        auth = {"token_verifier": StaticTokenVerifier(tokens), "auth": local_auth_settings(base_url)}
    server: MCPServer[Any] = MCPServer(
        "mcp-approval-tasks-demo",
        extensions=[tasks],
        lifespan=tasks.lifespan,
        middleware=[task_routing_middleware, tasks.listen_middleware],
        log_level="WARNING",
        **auth,
    )
    _register_tools(server)
    return server, tasks


def _register_tools(server: MCPServer[Any]) -> None:
    @server.tool()
    async def echo(text: str) -> str:
        """Return the text (never a task)."""
        return text

    @server.tool()
    async def slow_job(seconds: float, label: str = "job") -> str:
        """Sleep, then report; a task when it outlasts the threshold."""
        logger.info("slow_job %s started", label)  # tests count runs by this line
        await asyncio.sleep(seconds)
        return f"{label} finished after {seconds}s"

    @server.tool()
    async def required_job(label: str = "job") -> str:
        """Always answered as a task."""
        return f"{label} done"

    @server.tool()
    async def ask_name() -> str:
        """Ask the user for a name mid-run, then greet them."""
        answer = await current_task().elicit(
            "What is your name?", {"type": "object", "properties": {"name": {"type": "string"}}}
        )
        if answer.get("action") != "accept":
            return f"no name given ({answer.get('action')})"
        return f"Hello, {answer.get('content', {}).get('name')}!"

    @server.tool()
    async def ask_two() -> str:
        """Ask two questions at once."""
        schema = {"type": "object", "properties": {"value": {"type": "string"}}}
        first, second = await current_task().request_input(
            [
                {"method": "elicitation/create", "params": {"message": "first?", "requestedSchema": schema}},
                {"method": "elicitation/create", "params": {"message": "second?", "requestedSchema": schema}},
            ]
        )
        return f"{first.get('content', {}).get('value')}+{second.get('content', {}).get('value')}"

    @server.tool()
    async def failing_job() -> str:
        """Fail as a tool error (the task completes with isError)."""
        raise ToolError("the job failed")

    @server.tool()
    async def protocol_error_job() -> str:
        """Fail with a JSON-RPC error (the task fails)."""
        raise MCPError(code=-32603, message="the job hit a protocol error")


def main(argv: list[str] | None = None) -> None:
    """Run the demo server on 127.0.0.1 (streamable HTTP at ``/mcp``)."""
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--db", default="sqlite://")
    parser.add_argument("--threshold", type=float, default=0.2)
    parser.add_argument("--poll-interval", type=float, default=0.1)
    parser.add_argument("--lease-grace", type=float, default=1.0)
    parser.add_argument("--ttl", type=float, default=3600.0)
    parser.add_argument("--tokens", action="store_true", help="require the demo bearer tokens")
    parser.add_argument(
        "--mode",
        action="append",
        default=[],
        metavar="TOOL=MODE",
        help="override a tool's task mode (forbidden, optional, required); repeatable",
    )
    args = parser.parse_args(argv)
    try:
        overrides = dict(_tool_mode(text) for text in args.mode)
    except ValueError as exc:
        parser.error(str(exc))
    logging.basicConfig(level=logging.INFO)
    base_url = f"http://127.0.0.1:{args.port}"
    options = TaskOptions(
        threshold_s=args.threshold,
        poll_interval_s=args.poll_interval,
        lease_grace_s=args.lease_grace,
        sweep_interval_s=min(1.0, args.poll_interval),
        ttl_s=args.ttl,
        modes={**DEMO_MODES, **overrides},
        allow_anonymous_tasks=not args.tokens,
    )
    tokens = DEMO_TOKENS if args.tokens else None
    server, _ = build_tasks_demo_server(options, store=store_from_url(args.db), base_url=base_url, tokens=tokens)
    app = server.streamable_http_app(json_response=True)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", timeout_keep_alive=KEEP_ALIVE_S)


def _tool_mode(text: str) -> tuple[str, TaskMode]:
    """``TOOL=MODE`` as a (tool, mode) pair; ``ValueError`` naming what is wrong."""
    tool, sep, mode = text.partition("=")
    if not sep or not tool:
        raise ValueError(f"--mode {text!r}: expected TOOL=MODE")
    try:
        return tool, TaskMode(mode)
    except ValueError:
        modes = ", ".join(m.value for m in TaskMode)
        raise ValueError(f"--mode {text!r}: the mode is one of {modes}") from None


if __name__ == "__main__":
    main()
