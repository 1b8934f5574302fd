"""OpenTelemetry spans around the gate, the approval backend and execution (``mcp_approval.tracing``).

One gated call goes through approval to execution with the OpenTelemetry SDK recording every span
in memory (in a process of its own: ``tests/support/tracing_probe.py``); the spans are named and
nested as docs/operators.md says, and no attribute carries an argument value or a token. Without
the API package, tracing does nothing.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.timing import scaled

ROOT = Path(__file__).resolve().parents[2]
OPERATORS = ROOT / "docs" / "operators.md"
# Long enough that a random 43-character task id or trace id cannot contain one by chance ("50" once did).
ARGUMENT_VALUES = ("acct-traced", "acct-small", "30000", "40000", "4321")
SECRETS = ("alice-token", "carol-token")

Span = dict[str, Any]


def probe(scenario: str, directory: Path) -> dict[str, Any]:
    done = _python("-m", "tests.support.tracing_probe", scenario, str(directory))
    assert done.returncode == 0, done.stderr[-4000:]
    found: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return found


def ours(spans: list[Span], name: str, task_id: str | None = None) -> list[Span]:
    """The spans named ``mcp_approval.<name>`` (of ``task_id``, when given), in the order they ended."""
    return [
        span
        for span in spans
        if span["name"] == f"mcp_approval.{name}"
        and (task_id is None or span["attributes"].get("mcp_approval.task_id") == task_id)
    ]


def names_of(spans: list[Span], span_id: int | None) -> list[str]:
    return [span["name"] for span in spans if span["span"] == span_id]


def test_a_gated_call_is_traced_from_the_gate_to_its_execution(tmp_path: Path) -> None:
    found = probe("call", tmp_path)
    spans, task_id, withdrawn = found["spans"], found["task_id"], found["withdrawn"]

    permitted, gated, _withdrawn = ours(spans, "gate")
    assert permitted["attributes"] == {"mcp_approval.tool": "wire_transfer", "mcp_approval.decision": "permit"}
    assert gated["attributes"] == {
        "mcp_approval.tool": "wire_transfer",
        "mcp_approval.decision": "deny",
        "mcp_approval.next_action": "request",
        "mcp_approval.task_id": task_id,
    }
    assert names_of(spans, gated["parent"]) == ["tools/call wire_transfer"]  # the MCP SDK's request span

    (submitted,) = ours(spans, "backend.submit", task_id)
    assert submitted["parent"] == gated["span"]  # the submission is part of the call
    assert submitted["attributes"]["mcp_approval.backend"] == "local"

    statuses = ours(spans, "backend.status", task_id)
    assert statuses
    assert all(span["parent"] is None for span in statuses)  # background checks are traces of their own
    assert statuses[-1]["attributes"]["mcp_approval.status"] == "approved"

    (executed,) = ours(spans, "execute", task_id)
    assert executed["parent"] is None
    assert executed["attributes"] == {
        "mcp_approval.tool": "wire_transfer",
        "mcp_approval.task_id": task_id,
        "mcp_approval.outcome": "approved-executed",
    }

    (cancelled,) = ours(spans, "backend.cancel", withdrawn)
    assert names_of(spans, cancelled["parent"]) == ["tasks/cancel"]  # part of the tasks/cancel request

    values = [value for span in spans for value in span["attributes"].values()]  # the SDK's spans too
    values += [value for span in spans for event in span["events"] for value in event.values()]
    leaked = [value for value in map(str, values) if any(secret in value for secret in (*ARGUMENT_VALUES, *SECRETS))]
    assert leaked == []
    documented = set(re.findall(r"^\| `(mcp_approval\.[\w.]+)` \|", _tracing_section(), flags=re.MULTILINE))
    assert documented == {span["name"] for span in spans if span["name"].startswith("mcp_approval.")}


def test_background_work_starts_a_trace_of_its_own(tmp_path: Path) -> None:
    """A status check or an execution spawned while a request was being answered is not part of it."""
    spans = probe("nesting", tmp_path)["spans"]
    (gate,), (submit,), (execute,) = (ours(spans, name) for name in ("gate", "backend.submit", "execute"))
    assert submit["parent"] == gate["span"]
    assert execute["parent"] is None
    assert execute["trace"] != gate["trace"]
    assert gate["attributes"] == {"mcp_approval.tool": "pay"}


def test_without_the_api_package_spans_do_nothing() -> None:
    code = """
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
    done = _python("-c", code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "no-op"


def test_the_documented_setup_exports_the_spans() -> None:
    (setup,) = re.findall(r"^```python\n(.*?)^```", _tracing_section(), flags=re.MULTILINE | re.DOTALL)
    code = setup + '\nfrom mcp_approval.tracing import span\nwith span("gate", tool="pay"):\n    pass\n'
    done = _python("-c", code)
    assert done.returncode == 0, done.stderr
    assert '"name": "mcp_approval.gate"' in done.stdout
    assert '"mcp_approval.tool": "pay"' in done.stdout


def _tracing_section() -> str:
    page = OPERATORS.read_text(encoding="utf-8")
    start = page.index("## Tracing")
    end = page.find("\n## ", start + 1)
    return page[start : end if end != -1 else None]


def _python(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    command = [sys.executable, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=scaled(300), check=False, env=env, cwd=ROOT)
