"""``mcp_client``: usage errors, keyed calls over a plain slow task and a failing one, stdio."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.client.auth import OAuthClientProvider

from mcp_approval.client import (
    AgentClient,
    CallInDoubtError,
    CallTarget,
    ClientUsageError,
    MemoryTokenStorage,
    SQLiteCallJournal,
    TaskFailedError,
    TaskPendingError,
    TasksClient,
    mcp_client,
)
from mcp_approval.tasks import TaskOptions, store_from_url
from mcp_approval.testing.tasks_demo import build_tasks_demo_server
from tests.support.timing import scaled
from tests.support.treasury import deployment_dir

pytestmark = pytest.mark.anyio

MODES = {"echo": "forbidden", "protocol_error_job": "required"}


def demo_server() -> Any:
    options = TaskOptions(modes=MODES, threshold_s=0.05, poll_interval_s=0.02)
    server, _ = build_tasks_demo_server(options, store=store_from_url("sqlite://"))
    return server


def in_process(server: Any, journal: SQLiteCallJournal, task_wait_s: float) -> AgentClient:
    tasks = TasksClient(task_wait_s=task_wait_s, default_poll_interval_s=0.02)
    return AgentClient(server, tasks=tasks, extensions=[tasks], call_journal=journal)


async def no_redirect(_url: str) -> None:
    raise AssertionError("no authorization in this test")


async def no_callback() -> Any:
    raise AssertionError("no authorization in this test")


def provider() -> OAuthClientProvider:
    from mcp_approval.client import oauth_client

    return oauth_client(
        "http://127.0.0.1:1/mcp",
        redirect_uris=["http://127.0.0.1:2/callback"],
        client_name="t",
        storage=MemoryTokenStorage(),
        redirect_handler=no_redirect,
        callback_handler=no_callback,
    )


@pytest.mark.parametrize(
    ("target", "options", "words"),
    [
        ("http://mcp.example.com/mcp", {}, "must be https"),
        ("ftp://127.0.0.1/mcp", {}, "must be https"),
        ("https://mcp.example.com/mcp", {"auth": "t", "headers": {"authorization": "Bearer u"}}, "two credentials"),
        ("https://mcp.example.com/mcp", {"auth": "provider", "headers": {"Authorization": "x"}}, "two credentials"),
        ("https://mcp.example.com/mcp", {"auth": ""}, "empty token"),
        (["python", "server.py"], {"auth": "t"}, "stdio command"),
        ([], {}, "command is empty"),
        ("server", {"auth": "t"}, "in-process"),
    ],
)
def test_usage_errors_name_the_problem(target: Any, options: dict[str, Any], words: str) -> None:
    if target == "server":
        target = demo_server()
    if options.get("auth") == "provider":
        options = {**options, "auth": provider()}
    with pytest.raises(ClientUsageError, match=words):
        mcp_client(target, **options)


async def test_a_bearer_token_becomes_the_authorization_header() -> None:
    client = mcp_client("http://127.0.0.1:9/mcp", auth="secret-token", headers={"X-Trace": "1"})
    assert client.http_client is not None
    assert client.http_client.headers["authorization"] == "Bearer secret-token"
    assert client.http_client.headers["x-trace"] == "1"
    await client.http_client.aclose()


async def test_a_keyed_slow_task_is_polled_again_not_called_again(tmp_path: Path) -> None:
    journal = SQLiteCallJournal(tmp_path / "calls.sqlite3")
    arguments = {"seconds": 0.4, "label": "report"}
    async with in_process(demo_server(), journal, task_wait_s=0.05) as client:
        with pytest.raises(TaskPendingError) as pending:
            await client.call_tool("slow_job", arguments, call_key="run-1/call-1")
        record = await journal.get("run-1/call-1")
        assert client.tasks is not None
        client.tasks.task_wait_s = 10
        result = await client.call_tool("slow_job", arguments, call_key="run-1/call-1")
    assert pending.value.details == {"remote_kind": "task_pending", "task_id": pending.value.task_id}
    assert record is not None
    assert record.task_id == pending.value.task_id
    assert record.outcome is None
    assert isinstance(result.content[0], types.TextContent)
    assert result.content[0].text == "report finished after 0.4s"
    finished = await journal.get("run-1/call-1")
    assert finished is not None
    assert finished.outcome is not None
    assert finished.outcome.task_id == record.task_id

    # A fresh server knows no task: the recorded outcome comes back without any call.
    async with in_process(
        demo_server(), SQLiteCallJournal(tmp_path / "calls.sqlite3"), task_wait_s=scaled(10)
    ) as again:
        replayed = await again.call_tool("slow_job", arguments, call_key="run-1/call-1")
    assert replayed == result


async def test_a_failed_task_is_recorded_and_raised_again(tmp_path: Path) -> None:
    journal = SQLiteCallJournal(tmp_path / "calls.sqlite3")
    async with in_process(demo_server(), journal, task_wait_s=scaled(10)) as client:
        with pytest.raises(TaskFailedError) as first:
            await client.call_tool("protocol_error_job", {}, call_key="k")
        with pytest.raises(TaskFailedError) as second:
            await client.call_tool("protocol_error_job", {}, call_key="k")
    assert first.value.remote_kind == second.value.remote_kind == "task_failed"
    assert second.value.task_id == first.value.task_id
    assert second.value.error is not None
    assert second.value.error.message == "the job hit a protocol error"


async def test_a_call_sent_without_a_task_id_on_record_is_not_repeated(tmp_path: Path) -> None:
    journal = SQLiteCallJournal(tmp_path / "calls.sqlite3")
    server = demo_server()
    # as a process killed before the server answered leaves it
    await journal.begin("lost", CallTarget.of(f"in-process:{server.name}", "slow_job", {"seconds": 0}))
    async with in_process(server, journal, task_wait_s=scaled(10)) as client:
        with pytest.raises(CallInDoubtError) as doubt:
            await client.call_tool("slow_job", {"seconds": 0}, call_key="lost")
    assert doubt.value.call_key == "lost"


async def test_a_plain_result_is_recorded_too(tmp_path: Path) -> None:
    journal = SQLiteCallJournal(tmp_path / "calls.sqlite3")
    async with mcp_client(demo_server(), tasks=True, call_journal=journal) as client:
        result = await client.call_tool("echo", {"text": "hi"}, call_key="echo-1")
    record = await journal.get("echo-1")
    assert record is not None
    assert record.task_id is None
    assert record.outcome is not None
    assert types.CallToolResult.model_validate(record.outcome.result) == result


async def test_a_stdio_command(tmp_path: Path) -> None:
    config = deployment_dir(tmp_path) / "config.toml"
    command = [sys.executable, "-m", "mcp_approval", "serve", "--config", str(config), "--stdio"]
    async with mcp_client(command, tasks=True) as client:
        tools = await client.list_tools()
    assert "wire_transfer" in {tool.name for tool in tools.tools}


async def test_a_journal_path_is_a_sqlite_file_that_outlives_the_client(tmp_path: Path) -> None:
    path = tmp_path / "journal" / "calls.sqlite3"
    path.parent.mkdir()
    tasks = TasksClient(task_wait_s=scaled(10), default_poll_interval_s=0.02)
    async with AgentClient(demo_server(), tasks=tasks, extensions=[tasks], call_journal=str(path)) as client:
        result = await client.call_tool("slow_job", {"seconds": 0.2}, call_key="k")
    record = await SQLiteCallJournal(path).get("k")
    assert record is not None
    assert record.outcome is not None
    assert types.CallToolResult.model_validate(record.outcome.result) == result


async def test_the_sqlite_journal_refuses_a_key_begun_twice(tmp_path: Path) -> None:
    journal = SQLiteCallJournal(tmp_path / "calls.sqlite3")
    target = CallTarget.of("in-process:demo", "slow_job", {})
    await journal.begin("k", target)
    with pytest.raises(ValueError, match="already journaled"):
        await journal.begin("k", target)
