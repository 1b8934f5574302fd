"""SEP-2663 on the wire: the checklist items of the wire notes, over streamable HTTP (in-process ASGI)."""

from __future__ import annotations

import json
import re

import pytest

from mcp_approval.checks.wire import TASKS, envelope
from tests.support.polling import eventually
from tests.support.timing import scaled

pytestmark = pytest.mark.anyio

TASK_REQUIRED = {"extensions": {TASKS: {}}}


def finished(reply) -> bool:
    return reply.result["status"] in ("completed", "failed", "cancelled")


async def wait_done(wire, task_id: str):
    return (await eventually(lambda: wire.get(task_id), finished)).result


@pytest.mark.sep_check("sep-2663-no-task-result-type-elsewhere", "sep-2663-server-decides-task-creation")
async def test_fast_optional_call_is_an_ordinary_result(serve_inprocess):
    async with serve_inprocess(threshold_s=5.0) as (wire, _):
        reply = await wire.call_tool("slow_job", {"seconds": 0, "label": "quick"})
    assert reply.result["resultType"] == "complete"
    assert "taskId" not in reply.result
    assert reply.result["content"][0]["text"] == "quick finished after 0.0s"


@pytest.mark.sep_check(
    "sep-2663-result-type-task-on-create",
    "sep-2663-result-type-complete",
    "sep-2663-create-result-shape",
    "sep-2663-readable-before-create-result",
    "sep-2663-tasks-get-status-shaped",
    "sep-2663-no-request-state-or-related-task",
)
async def test_slow_optional_call_becomes_a_working_task_then_completes(serve_inprocess):
    async with serve_inprocess(threshold_s=0.05) as (wire, _):
        created = (await wire.call_tool("slow_job", {"seconds": 0.4, "label": "slow"})).result
        assert created["resultType"] == "task"
        assert created["status"] == "working"
        assert set(created) >= {"taskId", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"}
        assert not {"result", "error", "inputRequests", "requestState", "task", "ttl", "pollInterval"} & set(created)
        first = (await wire.get(created["taskId"])).result  # readable at once (strong consistency)
        assert first["resultType"] == "complete"
        assert first["status"] == "working"
        assert "result" not in first
        assert "error" not in first
        done = await wait_done(wire, created["taskId"])
    assert done["status"] == "completed"
    assert done["result"]["resultType"] == "complete"
    assert done["result"]["content"][0]["text"] == "slow finished after 0.4s"
    assert "io.modelcontextprotocol/related-task" not in done["result"].get("_meta", {})


@pytest.mark.sep_check("sep-2663-no-task-result-type-elsewhere")
async def test_forbidden_tool_never_becomes_a_task(serve_inprocess):
    async with serve_inprocess(threshold_s=0.0) as (wire, _):
        reply = await wire.call_tool("echo", {"text": "hi"})
    assert reply.result["resultType"] == "complete"
    assert reply.result["content"][0]["text"] == "hi"


@pytest.mark.sep_check("sep-2663-server-decides-task-creation")
async def test_threshold_none_keeps_optional_tools_inline(serve_inprocess):
    async with serve_inprocess(threshold_s=None) as (wire, _):
        reply = await wire.call_tool("slow_job", {"seconds": 0.3})
        required = (await wire.call_tool("required_job", {"label": "r"})).result
    assert reply.result["resultType"] == "complete"
    assert required["resultType"] == "task"


async def test_required_tool_is_a_task_even_when_it_finishes_at_once(serve_inprocess):
    async with serve_inprocess() as (wire, _):
        created = (await wire.call_tool("required_job", {"label": "r"})).result
        assert created["resultType"] == "task"
        done = await wait_done(wire, created["taskId"])
    assert done["status"] == "completed"
    assert done["result"]["content"][0]["text"] == "r done"


@pytest.mark.sep_check("sep-2663-task-only-call-missing-capability", "sep-2663-envelope-errors-http-400")
async def test_required_tool_without_declaration_is_missing_capability(serve_inprocess):
    async with serve_inprocess() as (wire, _):
        reply = await wire.call_tool("required_job", {}, meta=envelope(tasks=False))
    assert reply.status == 400
    assert reply.error["code"] == -32021
    assert reply.error["data"]["requiredCapabilities"] == TASK_REQUIRED


@pytest.mark.sep_check("sep-2663-no-task-unless-request-declares", "sep-2663-per-request-declaration")
async def test_declaration_is_per_request(serve_inprocess):
    async with serve_inprocess(threshold_s=0.05) as (wire, _):
        declared = (await wire.call_tool("slow_job", {"seconds": 0.3})).result
        undeclared = (await wire.call_tool("slow_job", {"seconds": 0.3}, meta=envelope(tasks=False))).result
    assert declared["resultType"] == "task"
    assert undeclared["resultType"] == "complete"


@pytest.mark.sep_check("sep-2663-no-task-unless-request-declares", "sep-2663-legacy-capability-non-declaring")
async def test_legacy_only_declaration_is_non_declaring(serve_inprocess):
    meta = envelope(tasks=False)
    meta["io.modelcontextprotocol/clientCapabilities"]["tasks"] = {"requests": {"tools": {"call": {}}}}
    async with serve_inprocess(threshold_s=0.05) as (wire, _):
        reply = await wire.call_tool("slow_job", {"seconds": 0.2}, meta=meta)
        tasks_get = await wire.get("whatever", meta=meta)
    assert reply.result["resultType"] == "complete"
    assert tasks_get.error["code"] == -32021


@pytest.mark.parametrize("legacy_task", [{"ttl": 60000}, True, "x", 5, None, [1, 2]])
@pytest.mark.sep_check("sep-2663-legacy-task-param-ignored")
async def test_legacy_task_param_is_ignored_whatever_its_value(serve_inprocess, legacy_task):
    async with serve_inprocess(threshold_s=5.0) as (wire, _):
        reply = await wire.request("tools/call", {"name": "echo", "arguments": {"text": "x"}, "task": legacy_task})
    assert reply.status == 200
    assert reply.result["resultType"] == "complete"
    assert reply.result["content"][0]["text"] == "x"


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
@pytest.mark.sep_check("sep-2663-tasks-methods-need-declaration", "sep-2663-envelope-errors-http-400")
async def test_tasks_methods_need_the_declaration(serve_inprocess, method):
    async with serve_inprocess(threshold_s=0.0) as (wire, _):
        created = (await wire.call_tool("slow_job", {"seconds": 5})).result
        params = {"taskId": created["taskId"], "inputResponses": {}} if method == "tasks/update" else None
        reply = await wire.request(method, params or {"taskId": created["taskId"]}, meta=envelope(tasks=False))
        still = (await wire.get(created["taskId"])).result
    assert reply.status == 400
    assert reply.error["code"] == -32021
    assert reply.error["data"]["requiredCapabilities"] == TASK_REQUIRED
    assert still["status"] == "working"  # the refused cancel changed nothing


@pytest.mark.parametrize("method", ["tasks/result", "tasks/list"])
@pytest.mark.sep_check("sep-2663-removed-methods-not-found")
async def test_removed_methods_are_method_not_found(serve_inprocess, method):
    async with serve_inprocess() as (wire, _):
        reply = await wire.request(method, {"taskId": "x"})
    assert reply.error["code"] == -32601


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
@pytest.mark.sep_check(
    "sep-2663-tasks-get-unknown-id",
    "sep-2663-update-unknown-id",
    "sep-2663-cancel-unknown-id",
    "sep-2663-envelope-errors-http-400",
)
async def test_unknown_task_is_invalid_params(serve_inprocess, method):
    params = {"taskId": "no-such-task"}
    if method == "tasks/update":
        params["inputResponses"] = {"k": {"action": "accept"}}
    async with serve_inprocess() as (wire, _):
        reply = await wire.request(method, params)
    assert reply.status == 400
    assert reply.error["code"] == -32602
    assert reply.error["message"] == "Unknown or expired task"


@pytest.mark.sep_check("sep-2663-mcp-name-mismatch-rejected")
async def test_mcp_name_must_match_task_id(serve_inprocess):
    async with serve_inprocess(threshold_s=0.0) as (wire, _):
        created = (await wire.call_tool("slow_job", {"seconds": 0.2})).result
        wrong = await wire.get(created["taskId"], headers={"mcp-name": "other"})
        missing = await wire.get(created["taskId"], headers={"mcp-name": ""})
        right = await wire.get(created["taskId"])
        cancel_wrong = await wire.cancel(created["taskId"], headers={"mcp-name": "other"})
        still = (await wire.get(created["taskId"])).result
    assert (wrong.status, wrong.error["code"]) == (400, -32020)
    assert (missing.status, missing.error["code"]) == (400, -32020)
    assert right.result["taskId"] == created["taskId"]
    assert cancel_wrong.error["code"] == -32020
    assert still["status"] != "cancelled"


@pytest.mark.sep_check("sep-2663-mcp-name-mismatch-rejected")
async def test_base64_encoded_mcp_name_is_accepted(serve_inprocess):
    import base64

    async with serve_inprocess(threshold_s=0.0) as (wire, _):
        created = (await wire.call_tool("slow_job", {"seconds": 0.1})).result
        encoded = "=?base64?" + base64.b64encode(created["taskId"].encode()).decode() + "?="
        reply = await wire.get(created["taskId"], headers={"mcp-name": encoded})
    assert reply.result["taskId"] == created["taskId"]


@pytest.mark.sep_check("sep-2663-tool-error-is-completed")
async def test_tool_error_completes_with_is_error(serve_inprocess):
    async with serve_inprocess() as (wire, _):
        created = (await wire.call_tool("failing_job", {}, meta=envelope())).result
        if created["resultType"] == "complete":  # optional tool that failed quickly: inline
            assert created["isError"] is True
            return
        done = await wait_done(wire, created["taskId"])
    assert done["status"] == "completed"
    assert done["result"]["isError"] is True


@pytest.mark.sep_check("sep-2663-tasks-get-status-shaped", "sep-2663-failed-carries-error")
async def test_protocol_error_fails_the_task_with_its_error(serve_inprocess):
    async with serve_inprocess(threshold_s=0.0, modes={"protocol_error_job": "required"}) as (wire, _):
        created = (await wire.call_tool("protocol_error_job", {})).result
        done = await wait_done(wire, created["taskId"])
    assert done["status"] == "failed"
    assert done["error"] == {"code": -32603, "message": "the job hit a protocol error"}
    assert done["statusMessage"]
    assert "result" not in done


@pytest.mark.sep_check("sep-2663-tool-error-is-completed")
async def test_tool_error_as_required_task_is_completed_not_failed(serve_inprocess):
    async with serve_inprocess(modes={"failing_job": "required"}) as (wire, _):
        created = (await wire.call_tool("failing_job", {})).result
        done = await wait_done(wire, created["taskId"])
    assert done["status"] == "completed"
    assert done["result"]["isError"] is True
    assert done["result"]["content"][0]["text"]


@pytest.mark.sep_check("sep-2663-result-type-complete", "sep-2663-tasks-get-status-shaped", "sep-2663-cancel-ack")
async def test_cancel_while_running_ends_cancelled_and_stays_so(serve_inprocess):
    async with serve_inprocess(threshold_s=0.0) as (wire, _):
        created = (await wire.call_tool("slow_job", {"seconds": 30})).result
        ack = await wire.cancel(created["taskId"])
        done = await wait_done(wire, created["taskId"])
        again = await wire.cancel(created["taskId"])
        after = (await wire.get(created["taskId"])).result
    assert ack.result == {"resultType": "complete", "_meta": ack.result["_meta"]}
    assert done["status"] == "cancelled"
    assert "result" not in done
    assert "error" not in done
    assert again.status == 200
    assert again.result["resultType"] == "complete"
    assert after["status"] == "cancelled"


@pytest.mark.sep_check("sep-2663-cancel-ack")
async def test_cancel_after_completion_is_an_ack_and_changes_nothing(serve_inprocess):
    async with serve_inprocess() as (wire, _):
        created = (await wire.call_tool("required_job", {"label": "r"})).result
        done = await wait_done(wire, created["taskId"])
        ack = await wire.cancel(created["taskId"])
        after = (await wire.get(created["taskId"])).result
    assert done["status"] == "completed"
    assert ack.result["resultType"] == "complete"
    assert after["status"] == "completed"
    assert after["result"] == done["result"]


@pytest.mark.sep_check(
    "sep-2663-result-type-complete",
    "sep-2663-tasks-get-status-shaped",
    "sep-2663-update-ack-empty",
    "sep-2663-update-ignores-unknown-keys",
    "sep-2663-all-answered-resumes",
)
async def test_input_request_round_trip(serve_inprocess):
    async with serve_inprocess(threshold_s=0.0) as (wire, _):
        created = (await wire.call_tool("ask_name", {})).result
        waiting = (
            await eventually(lambda: wire.get(created["taskId"]), lambda r: r.result["status"] == "input_required")
        ).result
        (key,) = waiting["inputRequests"]
        request = waiting["inputRequests"][key]
        assert request["method"] == "elicitation/create"
        assert request["params"]["message"] == "What is your name?"
        again = (await wire.get(created["taskId"])).result
        assert again["inputRequests"] == waiting["inputRequests"]  # repeated until answered
        ignored = await wire.update(created["taskId"], {"not-a-key": {"action": "accept"}})
        assert ignored.result["resultType"] == "complete"
        assert (await wire.get(created["taskId"])).result["status"] == "input_required"
        ack = await wire.update(created["taskId"], {key: {"action": "accept", "content": {"name": "Luca"}}})
        assert ack.result["resultType"] == "complete"
        done = await wait_done(wire, created["taskId"])
    assert done["status"] == "completed"
    assert done["result"]["content"][0]["text"] == "Hello, Luca!"


@pytest.mark.sep_check(
    "sep-2663-input-keys-unique",
    "sep-2663-update-ignores-unknown-keys",
    "sep-2663-partial-answers-keep-input-required",
)
async def test_partial_answers_keep_input_required_and_keys_are_never_reused(serve_inprocess):
    async with serve_inprocess(threshold_s=0.0) as (wire, _):
        created = (await wire.call_tool("ask_two", {})).result
        waiting = (
            await eventually(lambda: wire.get(created["taskId"]), lambda r: len(r.result.get("inputRequests", {})) == 2)
        ).result
        first, second = sorted(waiting["inputRequests"])
        await wire.update(created["taskId"], {first: {"action": "accept", "content": {"value": "a"}}})
        partial = (await wire.get(created["taskId"])).result
        assert partial["status"] == "input_required"
        assert set(partial["inputRequests"]) == {second}
        # an answer to an already-answered key is ignored, not re-applied
        await wire.update(
            created["taskId"],
            {
                first: {"action": "accept", "content": {"value": "zzz"}},
                second: {"action": "accept", "content": {"value": "b"}},
            },
        )
        done = await wait_done(wire, created["taskId"])
    assert first != second
    assert done["result"]["content"][0]["text"] == "a+b"


@pytest.mark.sep_check("sep-2663-unguessable-task-ids")
async def test_task_ids_are_256_bit_random(serve_inprocess):
    async with serve_inprocess() as (wire, _):
        ids = [(await wire.call_tool("required_job", {})).result["taskId"] for _ in range(20)]
    assert len(set(ids)) == 20
    for task_id in ids:
        assert re.fullmatch(r"[A-Za-z0-9_-]{43}", task_id)  # 32 bytes, URL-safe base64


async def test_ttl_is_reported_and_can_be_extended(serve_inprocess):
    async with serve_inprocess(ttl_s=60.0) as (wire, tasks):
        created = (await wire.call_tool("required_job", {})).result
        assert created["ttlMs"] == 60000
        assert await tasks.store.extend_ttl(created["taskId"], 120_000)
        reply = (await wire.get(created["taskId"])).result
        assert await tasks.store.extend_ttl(created["taskId"], None)
        unlimited = (await wire.get(created["taskId"])).result
    assert reply["ttlMs"] == 120000
    assert "ttlMs" in unlimited
    assert unlimited["ttlMs"] is None


@pytest.mark.sep_check("sep-2663-tasks-get-unknown-id", "sep-2663-readable-for-ttl")
async def test_expired_tasks_are_unknown_and_purged(serve_inprocess):
    from mcp_approval.clock import ManualClock

    clock = ManualClock()
    async with serve_inprocess(ttl_s=10.0, clock=clock) as (wire, tasks):
        created = (await wire.call_tool("required_job", {})).result
        assert (await wire.get(created["taskId"])).result["status"] in ("working", "completed")
        clock.advance(9_999)
        assert (await wire.get(created["taskId"])).status == 200  # not before its TTL
        clock.advance(1)
        expired = await wire.get(created["taskId"])
        await tasks.runtime.sweep_once()
        row = await tasks.store.get(created["taskId"])
    assert expired.error == {"code": -32602, "message": "Unknown or expired task"}
    assert row is None


async def test_anonymous_http_caller_gets_no_task(serve_inprocess):
    async with serve_inprocess(threshold_s=0.0, allow_anonymous_tasks=False) as (wire, tasks):
        reply = await wire.call_tool("slow_job", {"seconds": 0.1, "label": "anon"})
        required = await wire.call_tool("required_job", {"label": "anon"})
        stored = await tasks.store.count_active()
    assert reply.result["resultType"] == "complete"
    assert required.result["resultType"] == "complete"
    assert stored == 0


@pytest.mark.sep_check("sep-2663-task-access-by-principal")
async def test_other_principals_cannot_see_update_or_cancel_a_task(serve_inprocess):
    async with serve_inprocess(tokens=True, threshold_s=0.0) as (alice, _):
        bob = alice.as_principal("bob-token")
        created = (await alice.call_tool("ask_name", {})).result
        task_id = created["taskId"]
        await eventually(lambda: alice.get(task_id), lambda r: r.result["status"] == "input_required")
        key = next(iter((await alice.get(task_id)).result["inputRequests"]))
        unknown = await bob.get("forged-id")
        replies = [
            await bob.get(task_id),
            await bob.update(task_id, {key: {"action": "accept", "content": {"name": "Mallory"}}}),
            await bob.cancel(task_id),
        ]
        after = (await alice.get(task_id)).result
    for reply in replies:
        assert reply.status == unknown.status == 400
        assert reply.error == unknown.error == {"code": -32602, "message": "Unknown or expired task"}
    assert after["status"] == "input_required"
    assert key in after["inputRequests"]


async def test_principal_is_stored_as_a_digest(serve_inprocess):
    async with serve_inprocess(tokens=True) as (alice, tasks):
        created = (await alice.call_tool("required_job", {})).result
        row = await tasks.store.get(created["taskId"])
    assert row is not None
    assert row.principal_digest is not None
    assert re.fullmatch(r"[0-9a-f]{64}", row.principal_digest)
    assert "alice" not in repr(row)


async def test_limits_answer_without_a_task_and_warn(serve_inprocess, caplog):
    async with serve_inprocess(tokens=True, threshold_s=0.0, max_per_principal=1) as (alice, _):
        bob = alice.as_principal("bob-token")
        first = (await alice.call_tool("slow_job", {"seconds": 5})).result
        with caplog.at_level("WARNING", logger="mcp_approval.tasks"):
            second = (await alice.call_tool("slow_job", {"seconds": 0.1, "label": "inline"})).result
        bobs = (await bob.call_tool("slow_job", {"seconds": 5})).result
        await alice.cancel(first["taskId"])
        await bob.cancel(bobs["taskId"])
    assert first["resultType"] == "task"
    assert second["resultType"] == "complete"
    assert second["content"][0]["text"] == "inline finished after 0.1s"
    assert bobs["resultType"] == "task"
    assert any("max_per_principal reached" in r.getMessage() for r in caplog.records)


async def test_global_limit(serve_inprocess, caplog):
    async with serve_inprocess(threshold_s=0.0, max_tasks=1) as (wire, _):
        first = (await wire.call_tool("slow_job", {"seconds": 5})).result
        with caplog.at_level("WARNING", logger="mcp_approval.tasks"):
            second = (await wire.call_tool("slow_job", {"seconds": 0.1})).result
        await wire.cancel(first["taskId"])
    assert second["resultType"] == "complete"
    assert any("max_tasks reached" in r.getMessage() for r in caplog.records)


@pytest.mark.sep_check("sep-2663-cancelled-notification-not-task-cancel")
async def test_cancelled_notification_does_not_cancel_a_task(serve_inprocess):
    async with serve_inprocess(threshold_s=0.0) as (wire, _):
        created = (await wire.call_tool("slow_job", {"seconds": 0.5, "label": "kept"})).result
        notification = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": 1, "reason": "stop", "_meta": envelope()},
        }
        sent = await wire.http.post(
            "/mcp",
            json=notification,
            headers={
                "accept": "application/json, text/event-stream",
                "mcp-protocol-version": "2026-07-28",
                "mcp-method": "notifications/cancelled",
            },
        )
        done = await wait_done(wire, created["taskId"])
    assert sent.status_code < 500
    assert done["status"] == "completed"
    assert done["result"]["content"][0]["text"] == "kept finished after 0.5s"


@pytest.mark.sep_check("sep-2663-listen-task-ids-need-declaration")
async def test_listen_for_task_ids_needs_the_declaration(serve_inprocess):
    params = {"notifications": {"taskIds": ["x"]}}
    async with serve_inprocess() as (wire, _):
        refused = await wire.request("subscriptions/listen", dict(params), meta=envelope(tasks=False))
    assert refused.status == 400
    assert refused.error["code"] == -32021
    assert refused.error["data"]["requiredCapabilities"] == TASK_REQUIRED


@pytest.mark.sep_check("sep-2663-server-advertises-extension")
async def test_discover_advertises_the_extension_and_no_legacy_capability(serve_inprocess):
    async with serve_inprocess() as (wire, _):
        reply = await wire.request("server/discover", {})
    capabilities = reply.result["capabilities"]
    assert capabilities["extensions"][TASKS] == {}
    assert "tasks" not in capabilities


@pytest.mark.sep_check("sep-2663-listen-ack-notified-ids-only")
async def test_listen_acknowledges_only_known_task_ids(tmp_path):
    """An id the server does not know is left out of the acknowledgement (nothing will be sent for it).

    The listen stream stays open, which the in-process ASGI transport cannot stream: real HTTP.
    """
    import httpx

    from tests.support.process import running

    body = {
        "jsonrpc": "2.0",
        "id": 99,
        "method": "subscriptions/listen",
        "params": {"notifications": {"taskIds": ["x"], "toolsListChanged": True}, "_meta": envelope()},
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "subscriptions/listen",
    }
    with running(f"sqlite:///{tmp_path / 'tasks.db'}", tmp_path) as server:
        async with (
            httpx.AsyncClient(base_url=server.base_url, timeout=scaled(10)) as http,
            http.stream("POST", "/mcp", json=body, headers=headers) as response,
        ):
            first_event = ""
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    first_event = line
                    break
    acknowledged = json.loads(first_event[5:])
    assert acknowledged["method"] == "notifications/subscriptions/acknowledged"
    assert not acknowledged["params"].get("notifications", {}).get("taskIds")


@pytest.mark.sep_check("sep-2663-client-accepts-either-result", "sep-2663-client-sends-mcp-name")
async def test_sdk_client_sends_mcp_name_on_tasks_requests():
    """TasksClient over real streamable HTTP: the server's Mcp-Name check would refuse it otherwise."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from mcp_approval.client import TasksClient
    from mcp_approval.tasks import TaskOptions
    from mcp_approval.testing.tasks_demo import build_tasks_demo_server

    server, _ = build_tasks_demo_server(TaskOptions(threshold_s=0.0, poll_interval_s=0.02))
    app = server.streamable_http_app()
    async with server.session_manager.run():
        http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1:8000")
        transport = streamable_http_client("http://127.0.0.1:8000/mcp", http_client=http)
        async with Client(transport, extensions=[TasksClient(task_wait_s=scaled(10))]) as client:
            result = await client.call_tool("slow_job", {"seconds": 0.1, "label": "http"})
    assert result.content[0].text == "http finished after 0.1s"


@pytest.mark.sep_check("sep-2663-input-requests-declared-kinds")
async def test_input_request_needs_the_capability_declared_on_the_creating_call(serve_inprocess):
    async with serve_inprocess(threshold_s=0.0) as (wire, _):
        created = (await wire.call_tool("ask_name", {}, meta=envelope(elicitation=False))).result
        done = await wait_done(wire, created["taskId"])
    assert done["status"] == "failed"
    assert done["error"]["code"] == -32021
    assert done["error"]["data"] == {"requiredCapabilities": {"elicitation": {"form": {}}}}


async def test_an_unreachable_store_fails_startup_with_a_clear_error(tmp_path):
    from mcp_approval.storage import StoreUnavailableError
    from mcp_approval.tasks import TasksExtension, store_from_url

    tasks = TasksExtension(store=store_from_url("postgresql://nobody@127.0.0.1:1/none"))
    with pytest.raises(StoreUnavailableError, match="store unavailable"):
        async with tasks.lifespan():
            pass
    with pytest.raises(StoreUnavailableError):  # still stopped: a second start tries again
        async with tasks.lifespan():
            pass


def test_a_bad_store_url_names_the_scheme():
    from mcp_approval.tasks import store_from_url

    with pytest.raises(ValueError, match="unsupported database URL scheme 'mysql'"):
        store_from_url("mysql://x/y")
