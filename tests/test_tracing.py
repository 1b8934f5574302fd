"""OpenTelemetry spans around the gate, the approval backend and execution (``mcp_approval.tracing``).

One gated call goes through approval to execution in this process with the OpenTelemetry SDK
recording every span in memory; the spans are named and nested as docs/operators.md says, and
no attribute carries an argument value or a token. Without the API package, tracing does nothing.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcp_approval.tracing import span
from tests.approval.inprocess import inprocess_treasury
from tests.support.polling import eventually
from tests.treasury.helpers import approval_for, assert_approved_executed, settled

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[1]
OPERATORS = ROOT / "docs" / "operators.md"
ARGUMENT_VALUES = ("acct-traced", "acct-small", "30000", "40000", "50")
SECRETS = ("alice-token", "carol-token")


@pytest.fixture(scope="module")
def exporter() -> Iterator[InMemorySpanExporter]:
    """Every span of this process, kept in memory (the global provider can be set once per process)."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        trace.set_tracer_provider(TracerProvider())
    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    yield memory
    memory.shutdown()  # spans of later tests are dropped, not kept


def ours(spans: tuple[ReadableSpan, ...], name: str, task_id: str | None = None) -> list[ReadableSpan]:
    """The spans named ``mcp_approval.<name>`` (of ``task_id``, when given)."""
    return [
        span
        for span in spans
        if span.name == f"mcp_approval.{name}"
        and (task_id is None or (span.attributes or {}).get("mcp_approval.task_id") == task_id)
    ]


def attribute_text(spans: tuple[ReadableSpan, ...]) -> list[str]:
    values: list[Any] = [value for span in spans for value in (span.attributes or {}).values()]
    values += [value for span in spans for event in span.events for value in (event.attributes or {}).values()]
    return [str(value) for value in values]


async def test_a_gated_call_is_traced_from_the_gate_to_its_execution(
    tmp_path: Path, exporter: InMemorySpanExporter
) -> None:
    exporter.clear()
    async with inprocess_treasury(tmp_path) as harness:
        small = (await harness.alice.call_tool("wire_transfer", {"to": "acct-small", "amount": 50})).result
        assert small["isError"] is False
        created = (await harness.alice.call_tool("wire_transfer", {"to": "acct-traced", "amount": 30_000})).result
        task_id = created["taskId"]
        approval = await approval_for(harness.reviewer("carol"), "wire_transfer", to="acct-traced")
        assert (await harness.reviewer("carol").decide(approval["id"], "approve")).status_code == 200
        assert_approved_executed(await settled(harness.alice, task_id))
        withdrawn = (await harness.alice.call_tool("wire_transfer", {"to": "acct-traced", "amount": 40_000})).result
        assert "taskId" not in (await harness.alice.cancel(withdrawn["taskId"])).result  # an acknowledgement
        assert (await harness.alice.get(withdrawn["taskId"])).result["status"] == "cancelled"

        async def executed() -> list[ReadableSpan]:  # the span ends just after the result is stored
            return ours(exporter.get_finished_spans(), "execute", task_id)

        await eventually(executed, bool)
    spans = exporter.get_finished_spans()

    permitted, gated, _withdrawn = ours(spans, "gate")
    assert dict(permitted.attributes or {}) == {"mcp_approval.tool": "wire_transfer", "mcp_approval.decision": "permit"}
    assert dict(gated.attributes or {}) == {
        "mcp_approval.tool": "wire_transfer",
        "mcp_approval.decision": "deny",
        "mcp_approval.next_action": "request",
        "mcp_approval.task_id": task_id,
    }
    assert gated.parent is not None  # inside the MCP SDK's span of the tools/call request
    assert [span.name for span in spans if span.context.span_id == gated.parent.span_id] == ["tools/call wire_transfer"]

    (submitted,) = ours(spans, "backend.submit", task_id)
    assert submitted.parent is not None
    assert submitted.parent.span_id == gated.context.span_id  # the submission is part of the call
    assert (submitted.attributes or {})["mcp_approval.backend"] == "local"

    statuses = ours(spans, "backend.status", task_id)
    assert statuses
    assert all(span.parent is None for span in statuses)  # background checks are traces of their own
    assert (statuses[-1].attributes or {})["mcp_approval.status"] == "approved"

    (cancelled,) = ours(spans, "backend.cancel", withdrawn["taskId"])
    assert cancelled.parent is not None  # part of the tasks/cancel request
    assert [span.name for span in spans if span.context.span_id == cancelled.parent.span_id] == ["tasks/cancel"]

    (executed,) = ours(spans, "execute", task_id)
    assert executed.parent is None
    assert dict(executed.attributes or {}) == {
        "mcp_approval.tool": "wire_transfer",
        "mcp_approval.task_id": task_id,
        "mcp_approval.outcome": "approved-executed",
    }

    texts = attribute_text(spans)  # every span of the run, the SDK's included
    leaked = [text for text in texts if any(value in text for value in (*ARGUMENT_VALUES, *SECRETS))]
    assert leaked == []
    documented = set(re.findall(r"^\| `(mcp_approval\.[\w.]+)` \|", _tracing_section(), flags=re.MULTILINE))
    assert documented == {span.name for span in spans if span.name.startswith("mcp_approval.")}


def test_background_work_starts_a_trace_of_its_own(exporter: InMemorySpanExporter) -> None:
    """A status check or an execution spawned while a request was being answered is not part of it."""
    exporter.clear()
    with span("gate", tool="pay") as gate, span("backend.submit", backend="local"), span("execute", root=True):
        gate.set("decision", None)  # None: left unset
    spans = {traced.name: traced for traced in exporter.get_finished_spans()}
    gate_span, submit, execute = (spans[f"mcp_approval.{name}"] for name in ("gate", "backend.submit", "execute"))
    assert submit.parent is not None
    assert submit.parent.span_id == gate_span.context.span_id
    assert execute.parent is None
    assert execute.context.trace_id != gate_span.context.trace_id
    assert dict(gate_span.attributes or {}) == {"mcp_approval.tool": "pay"}


def test_without_the_api_package_spans_do_nothing() -> None:
    probe = """
import sys
sys.modules["opentelemetry"] = None  # as if opentelemetry-api were not installed
from mcp_approval import tracing
assert not tracing.tracing_available()
with tracing.span("gate", tool="t") as traced:
    traced.set("decision", "permit")
try:
    with tracing.span("execute", root=True):
        raise KeyError("passes through")
except KeyError:
    print("no-op")
"""
    done = _python(probe)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "no-op"


def test_the_documented_setup_exports_the_spans() -> None:
    (setup,) = re.findall(r"^```python\n(.*?)^```", _tracing_section(), flags=re.MULTILINE | re.DOTALL)
    probe = setup + '\nfrom mcp_approval.tracing import span\nwith span("gate", tool="pay"):\n    pass\n'
    done = _python(probe)
    assert done.returncode == 0, done.stderr
    assert '"name": "mcp_approval.gate"' in done.stdout
    assert '"mcp_approval.tool": "pay"' in done.stdout


def _tracing_section() -> str:
    page = OPERATORS.read_text(encoding="utf-8")
    start = page.index("## Tracing")
    end = page.find("\n## ", start + 1)
    return page[start : end if end != -1 else None]


def _python(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False, env=env
    )
