"""The seven fixtures of the ``tasks-*`` scenarios (SEP-2663), wired to the tasks extension.

Task support is a server-side registration choice, expressed through :data:`TASK_MODES`:
``greet`` never becomes a task, ``slow_compute`` becomes one when it outlives the threshold, and
the others always do (a client that did not declare the extension gets ``-32021`` for them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import anyio
import mcp_types as types
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError

from mcp_approval.protocol import INTERNAL_ERROR
from mcp_approval.tasks import TaskMode, current_task
from mcp_approval.testing.conformance._common import AnyContext, accepted_content, elicit_request, form_schema

__all__ = ["TASK_MODES", "TASK_TOOLS", "failing_job", "greet", "protocol_error_job", "register"]

#: How long the failing fixtures work before they fail; longer than any promotion threshold.
FAILURE_DELAY_S = 1.0


def greet(name: str) -> str:
    """Greets ``name`` synchronously; never runs as a task."""
    return f"Hello, {name}!"


async def slow_compute(seconds: float, label: str = "") -> str:
    """Sleeps ``seconds`` then reports; becomes a task when it outlives the threshold."""
    await anyio.sleep(seconds)
    return f"Computed {label or 'result'} after {seconds:g}s"


async def failing_job() -> str:
    """Works briefly, then fails with a tool error (a ``completed`` task with ``isError``)."""
    await anyio.sleep(FAILURE_DELAY_S)
    raise ToolError("failing_job failed on purpose")


async def protocol_error_job() -> str:
    """Works briefly, then raises a JSON-RPC error (a ``failed`` task)."""
    await anyio.sleep(FAILURE_DELAY_S)
    raise MCPError(code=INTERNAL_ERROR, message="protocol_error_job raised a protocol error on purpose")


def _accepted(answer: Mapping[str, Any]) -> dict[str, Any] | None:
    content = answer.get("content")
    return dict(content) if answer.get("action") == "accept" and isinstance(content, dict) else None


async def confirm_delete(filename: str) -> str:
    """Asks the user to confirm deleting ``filename`` (one ``input_required`` round)."""
    answer = await current_task().elicit(f"Delete {filename}?", form_schema({"confirm": "boolean"}))
    content = _accepted(answer)
    if content and content.get("confirm"):
        return f"Deleted {filename}"
    return f"Kept {filename}"


async def multi_input() -> str:
    """Asks two questions at once, so two input requests are pending together."""
    questions = {
        "name": ("What is your name?", form_schema({"name": "string"})),
        "confirm": ("Do you confirm?", form_schema({"confirm": "boolean"})),
    }
    answers: dict[str, Any] = {}

    async def ask(key: str) -> None:
        message, schema = questions[key]
        answers[key] = (_accepted(await current_task().elicit(message, schema)) or {}).get(key)

    async with anyio.create_task_group() as group:
        for key in questions:
            group.start_soon(ask, key)
    return f"Received name={answers['name']!r}, confirm={answers['confirm']!r}"


async def test_tool_with_task(ctx: AnyContext) -> str | types.InputRequiredResult:
    """Gathers ``user_name`` through MRTR, then does its work as a task."""
    content = accepted_content(ctx, "user_name")
    if content is None:
        ask = elicit_request("What is your name?", {"name": "string"})
        return types.InputRequiredResult(input_requests={"user_name": ask})
    await anyio.sleep(FAILURE_DELAY_S)
    return f"Hello, {content.get('name')}! Your task finished."


TASK_TOOLS: tuple[Callable[..., Any], ...] = (
    greet,
    slow_compute,
    failing_job,
    protocol_error_job,
    confirm_delete,
    multi_input,
    test_tool_with_task,
)

TASK_MODES: Mapping[str, TaskMode] = {
    "greet": TaskMode.FORBIDDEN,
    "slow_compute": TaskMode.OPTIONAL,
    "failing_job": TaskMode.REQUIRED,
    "protocol_error_job": TaskMode.REQUIRED,
    "confirm_delete": TaskMode.REQUIRED,
    "multi_input": TaskMode.REQUIRED,
    "test_tool_with_task": TaskMode.REQUIRED,
}


def register(server: MCPServer[Any]) -> list[str]:
    """Register the tasks fixtures; return their names."""
    for fn in TASK_TOOLS:
        server.add_tool(fn, structured_output=False)
    return [fn.__name__ for fn in TASK_TOOLS]
