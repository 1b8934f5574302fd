"""The client extension against the real server extension (in-process), and the legacy wire."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.client import advertise
from mcp.shared.exceptions import MCPError

from mcp_approval.client import (
    TaskCancelledError,
    TaskExpiredError,
    TaskFailedError,
    TaskInputRequiredError,
    TaskJournal,
    TaskPendingError,
    TasksClient,
)
from mcp_approval.client.tasks import GetTaskRequest
from mcp_approval.tasks import TaskOptions, store_from_url
from mcp_approval.tasks.models import TaskIdParams
from mcp_approval.testing.tasks_demo import build_tasks_demo_server
from tests.support.timing import scaled

pytestmark = pytest.mark.anyio

MODES = {"echo": "forbidden", "required_job": "required", "protocol_error_job": "required"}


def demo_server(**fields: Any):
    fields.setdefault("threshold_s", 0.05)
    fields.setdefault("poll_interval_s", 0.02)
    store = store_from_url(fields.pop("store_url", "sqlite://"))
    server, tasks = build_tasks_demo_server(TaskOptions(modes=MODES, **fields), store=store)
    return server, tasks


async def answer_name(request):
    assert request["method"] == "elicitation/create"
    return {"action": "accept", "content": {"name": "Grace"}}


async def elicitation_callback(context, params):
    assert params.message == "What is your name?"
    return types.ElicitResult(action="accept", content={"name": "Ada"})


@pytest.mark.sep_check("sep-2663-client-accepts-either-result", "sep-2663-client-answers-outstanding-keys-once")
async def test_input_requests_go_through_the_clients_elicitation_callback():
    server, _ = demo_server()
    tasks = TasksClient(task_wait_s=scaled(10))
    async with Client(server, extensions=[tasks], elicitation_callback=elicitation_callback) as client:
        result = await client.call_tool("ask_name", {})
    assert result.content[0].text == "Hello, Ada!"


async def test_an_explicit_input_handler_takes_precedence():
    server, _ = demo_server()
    tasks = TasksClient(task_wait_s=scaled(10), input_handler=answer_name)
    async with Client(server, extensions=[tasks], elicitation_callback=elicitation_callback) as client:
        result = await client.call_tool("ask_name", {})
    assert result.content[0].text == "Hello, Grace!"


async def test_input_the_client_did_not_declare_is_missing_capability():
    """A client without an elicitation callback declares no elicitation: the tool may not ask.

    The tool asks before the call became a task, so the call itself answers -32021.
    """
    server, tasks = demo_server()
    async with Client(server, extensions=[TasksClient(task_wait_s=scaled(10))]) as client:
        with pytest.raises(MCPError) as failed:
            await client.call_tool("ask_name", {})
        stored = await tasks.store.count_active()
    assert failed.value.code == -32021
    assert failed.value.data == {"requiredCapabilities": {"elicitation": {"form": {}}}}
    assert stored == 0


async def test_input_the_client_declines_raises_naming_the_task():
    async def decline(context, params):
        return types.ErrorData(code=-32600, message="no thanks")

    server, tasks = demo_server()
    async with Client(server, extensions=[TasksClient(task_wait_s=scaled(10))], elicitation_callback=decline) as client:
        with pytest.raises(TaskInputRequiredError) as raised:
            await client.call_tool("ask_name", {})
        row = await tasks.store.get(raised.value.task_id)
    assert row is not None
    assert row.status.value == "input_required"


async def test_failed_and_cancelled_tasks_raise_typed_errors():
    server, _ = demo_server()
    tasks_client = TasksClient(task_wait_s=0.05)
    async with Client(server, extensions=[tasks_client]) as client:
        with pytest.raises(TaskFailedError) as failed:
            await client.call_tool("protocol_error_job", {})
        with pytest.raises(TaskPendingError) as pending:
            await client.call_tool("slow_job", {"seconds": 30})
        await tasks_client.cancel(client.session, pending.value.task_id)
        tasks_client.task_wait_s = 10
        with pytest.raises(TaskCancelledError):
            await tasks_client.resume(client.session, pending.value.task_id)
    assert failed.value.error is not None
    assert failed.value.error.code == -32603


@pytest.mark.sep_check("sep-2848-client-persists-task-ids")
async def test_pending_task_is_journaled_and_resumed_by_a_new_client(tmp_path):
    server, _ = demo_server()
    resumer = TasksClient(task_wait_s=scaled(10))
    async with Client(server, extensions=[resumer]) as later:  # the server stays up meanwhile
        journal = TaskJournal(tmp_path / "agent.db")
        async with Client(server, extensions=[TasksClient(task_wait_s=0.05, journal=journal)]) as client:
            with pytest.raises(TaskPendingError) as pending:
                await client.call_tool("slow_job", {"seconds": 0.5, "label": "resumed"})
        journal.close()
        # The restarted agent starts with nothing but the journal file.
        reopened = TaskJournal(tmp_path / "agent.db")
        (entry,) = reopened.open_tasks()
        resumer.journal = reopened
        result = await resumer.resume(later.session, entry.task_id)
    assert entry.task_id == pending.value.task_id
    assert entry.tool_name == "slow_job"
    assert result.content[0].text == "resumed finished after 0.5s"
    assert reopened.open_tasks() == []


async def test_resume_of_a_task_from_another_client_process_keeps_polling(tmp_path):
    server, _ = demo_server(store_url=f"sqlite:///{tmp_path / 'tasks.db'}")
    first = TasksClient(task_wait_s=0.05)
    second = TasksClient(task_wait_s=scaled(10))
    async with Client(server, extensions=[first]) as c1, Client(server, extensions=[second]) as c2:
        with pytest.raises(TaskPendingError) as pending:
            await c1.call_tool("slow_job", {"seconds": 0.4, "label": "later"})
        result = await second.resume(c2.session, pending.value.task_id)
    assert result.content[0].text == "later finished after 0.4s"


async def test_unknown_task_raises_expired():
    server, _ = demo_server()
    tasks_client = TasksClient()
    async with Client(server, extensions=[tasks_client]) as client:
        with pytest.raises(TaskExpiredError):
            await tasks_client.resume(client.session, "forged")


@pytest.mark.sep_check("sep-2663-inert-on-legacy-connection")
async def test_legacy_connection_keeps_the_extension_inert():
    """On a 2025-11-25 connection a declared tasks extension never yields a task; tasks/* is -32601."""
    server, tasks = demo_server(threshold_s=0.0)
    async with Client(server, mode="legacy", extensions=[advertise("io.modelcontextprotocol/tasks")]) as client:
        slow = await client.call_tool("slow_job", {"seconds": 0.1, "label": "legacy"})
        required = await client.call_tool("required_job", {"label": "legacy"})
        with pytest.raises(MCPError) as raised:
            await client.session.send_request(GetTaskRequest(params=TaskIdParams(task_id="x")), dict)
        stored = await tasks.store.count_active()
    assert slow.content[0].text == "legacy finished after 0.1s"
    assert required.content[0].text == "legacy done"
    assert raised.value.code == -32601
    assert stored == 0
