"""Hostile or malformed requests get specific JSON-RPC errors and change nothing."""

from __future__ import annotations

import pytest

from mcp_approval.checks.wire import envelope
from tests.support.polling import eventually

pytestmark = pytest.mark.anyio


async def started_task(wire):
    created = (await wire.call_tool("ask_name", {})).result
    reply = await eventually(lambda: wire.get(created["taskId"]), lambda r: r.result["status"] == "input_required")
    return created["taskId"], reply.result


@pytest.mark.parametrize(
    "params",
    [
        {"taskId": 123},
        {"taskId": None},
        {"taskId": ["a"]},
        {"taskId": {"x": 1}},
        {},
        {"taskId": "x" * 10_000},
    ],
)
async def test_malformed_task_ids(serve_inprocess, params):
    async with serve_inprocess(threshold_s=0.0) as (wire, tasks):
        task_id, before = await started_task(wire)
        name = params["taskId"] if isinstance(params.get("taskId"), str) else "x"
        replies = [await wire.request(m, dict(params), name=name) for m in ("tasks/get", "tasks/cancel")]
        row = await tasks.store.get(task_id)
    for reply in replies:
        assert reply.status == 400
        assert reply.error["code"] == -32602
    assert row.status.value == before["status"]
    assert not row.cancel_requested


@pytest.mark.parametrize(
    "responses",
    ["not-an-object", 5, None, ["a"]],
)
async def test_malformed_input_responses(serve_inprocess, responses):
    async with serve_inprocess(threshold_s=0.0) as (wire, tasks):
        task_id, before = await started_task(wire)
        reply = await wire.request("tasks/update", {"taskId": task_id, "inputResponses": responses})
        row = await tasks.store.get(task_id)
    assert reply.error["code"] == -32602
    assert row.input_requests == before["inputRequests"]
    assert row.input_responses == {}


async def test_huge_input_responses_are_refused_whole(serve_inprocess):
    async with serve_inprocess(threshold_s=0.0, max_input_response_bytes=64_000) as (wire, tasks):
        task_id, before = await started_task(wire)
        (key,) = before["inputRequests"]
        huge = {key: {"action": "accept", "content": {"name": "x" * 100_000}}}
        reply = await wire.update(task_id, huge)
        row = await tasks.store.get(task_id)
    assert reply.error["code"] == -32602
    assert "limit is 64000" in reply.error["message"]
    assert row.status.value == "input_required"
    assert row.input_responses == {}


@pytest.mark.sep_check("sep-2663-update-ignores-unknown-keys")
async def test_many_unknown_keys_are_ignored(serve_inprocess):
    async with serve_inprocess(threshold_s=0.0) as (wire, tasks):
        task_id, before = await started_task(wire)
        junk = {f"k{i}": {"action": "accept"} for i in range(500)}
        reply = await wire.update(task_id, junk)
        row = await tasks.store.get(task_id)
    assert reply.result["resultType"] == "complete"
    assert row.input_requests == before["inputRequests"]
    assert row.input_responses == {}


@pytest.mark.parametrize(
    "meta",
    [
        "garbage",
        5,
        {"io.modelcontextprotocol/protocolVersion": "2026-07-28"},
        {**envelope(), "io.modelcontextprotocol/clientCapabilities": 5},
        {**envelope(), "io.modelcontextprotocol/clientCapabilities": {"extensions": ["x"]}},
        {**envelope(), "io.modelcontextprotocol/protocolVersion": "1999-01-01"},
    ],
)
async def test_garbage_meta_is_a_specific_error_not_a_crash(serve_inprocess, meta):
    async with serve_inprocess(threshold_s=0.0) as (wire, tasks):
        task_id, _before = await started_task(wire)
        reply = await wire.request("tasks/cancel", {"taskId": task_id, "_meta": meta})
        row = await tasks.store.get(task_id)
    assert reply.status in (400, 404), reply
    assert reply.error["code"] in (-32600, -32602, -32020, -32021, -32022), reply.error
    assert row.status.value == "input_required"
    assert not row.cancel_requested
