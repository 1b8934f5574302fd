"""Spans recorded in a process of their own (run by ``tests/tracing/test_tracing.py``; not a test module).

Usage: ``python -m tests.support.tracing_probe SCENARIO DIRECTORY``. The OpenTelemetry global
tracer provider can be set once per process, and once set every later client request carries a
``traceparent``, so it is set here rather than in the test process. Prints one JSON object:
``{"spans": [...], ...}``, each span as its name, trace, span and parent ids and attributes.

Scenarios:

- ``call``: the treasury in process; a permitted transfer, a gated one approved by carol and run,
  another cancelled by alice (``task_id`` and ``withdrawn`` name the two tasks);
- ``nesting``: a gate span holding a submit span and a ``root`` execute span.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcp_approval.tracing import span
from tests.approval.inprocess import inprocess_treasury
from tests.support.polling import eventually
from tests.treasury.helpers import approval_for, assert_approved_executed, settled


def _record() -> InMemorySpanExporter:
    provider = TracerProvider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    trace.set_tracer_provider(provider)
    return memory


def _described(spans: tuple[ReadableSpan, ...]) -> list[dict[str, Any]]:
    return [
        {
            "name": recorded.name,
            "trace": recorded.context.trace_id,
            "span": recorded.context.span_id,
            "parent": recorded.parent.span_id if recorded.parent is not None else None,
            "attributes": dict(recorded.attributes or {}),
            "events": [dict(event.attributes or {}) for event in recorded.events],
        }
        for recorded in spans
    ]


async def _call(directory: Path, memory: InMemorySpanExporter) -> dict[str, Any]:
    async with inprocess_treasury(directory) as harness:
        small = (await harness.alice.call_tool("wire_transfer", {"to": "acct-small", "amount": 4_321})).result
        assert small["isError"] is False
        created = (await harness.alice.call_tool("wire_transfer", {"to": "acct-traced", "amount": 30_000})).result
        task_id = created["taskId"]
        carol = harness.reviewer("carol")
        approval = await approval_for(carol, "wire_transfer", to="acct-traced")
        assert (await carol.decide(approval["id"], "approve")).status_code == 200
        assert_approved_executed(await settled(harness.alice, task_id))

        async def executed() -> list[str]:  # the span ends just after the result is stored
            return [recorded.name for recorded in memory.get_finished_spans() if recorded.name.endswith(".execute")]

        await eventually(executed, bool)
        withdrawn = (await harness.alice.call_tool("wire_transfer", {"to": "acct-traced", "amount": 40_000})).result
        assert "taskId" not in (await harness.alice.cancel(withdrawn["taskId"])).result  # an acknowledgement
        assert (await harness.alice.get(withdrawn["taskId"])).result["status"] == "cancelled"
    return {"task_id": task_id, "withdrawn": withdrawn["taskId"]}


def _nesting() -> None:
    with span("gate", tool="pay") as gate, span("backend.submit", backend="local"), span("execute", root=True):
        gate.set("decision", None)  # None: left unset


def main() -> None:
    scenario, directory = sys.argv[1], Path(sys.argv[2])
    memory = _record()
    found: dict[str, Any] = {}
    if scenario == "call":
        found = anyio.run(_call, directory, memory)
    else:
        _nesting()
    print(json.dumps({**found, "spans": _described(memory.get_finished_spans())}))


if __name__ == "__main__":
    main()
