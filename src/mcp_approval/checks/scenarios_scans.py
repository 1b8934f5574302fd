"""Scenarios that judge the run as a whole, from every answer it kept: the shapes, the envelopes, the
text a model reads while a task is pending, task ids, and what must never reach the client."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any

from mcp_approval.checks.judge import PENDING, envelope, model_texts, presents_as_done
from mcp_approval.checks.report import Failed, Skipped
from mcp_approval.checks.run import CheckRun
from mcp_approval.checks.wire import Exchange
from mcp_approval.protocol import (
    REMEDIATION_AVAILABLE,
    REMEDIATION_UNAVAILABLE,
    REMEDIATION_UNDISCLOSED,
    RESULT_TYPE_COMPLETE,
    RESULT_TYPE_INPUT_REQUIRED,
    RESULT_TYPE_TASK,
)

__all__ = [
    "ARTIFACT_NAMES",
    "approval_stays_private",
    "envelope_shape",
    "estimated_bits",
    "no_backend_artifacts",
    "pending_not_presented_as_done",
    "unguessable_task_ids",
    "wire_shapes",
]

#: Names of backend binding material (the ARAP binding's) that must never cross the wire.
ARTIFACT_NAMES = ("binding_token", "evaluation_id")
#: The fewest random bits a task id may carry, estimated (a UUIDv4 carries 122).
MIN_TASK_ID_BITS = 120
_TASK_METHODS = ("tasks/get", "tasks/update", "tasks/cancel")
_RELATED_TASK = "io.modelcontextprotocol/related-task"
#: With this many ids of one length, the positions that never vary are taken as fixed (not random).
_ENOUGH_IDS = 8
_STATUS_MEMBERS = {"working": (), "input_required": ("inputRequests",), "completed": ("result",), "failed": ("error",)}


def _results(run: CheckRun) -> Iterator[tuple[Exchange, dict[str, Any]]]:
    for exchange in run.transcript.exchanges:
        result = exchange.reply.body.get("result")
        if isinstance(result, dict):
            yield exchange, result


def _task_documents(run: CheckRun) -> Iterator[dict[str, Any]]:
    """Every task the run read: each CreateTaskResult and each ``tasks/get`` result."""
    for exchange, result in _results(run):
        if exchange.method == "tasks/get" or result.get("resultType") == RESULT_TYPE_TASK:
            yield result


def _dropped(run: CheckRun, evidence: list[str]) -> None:
    transcript = run.transcript
    evidence.append(f"scanned {len(transcript.exchanges)} answers")
    if transcript.dropped:
        evidence.append(f"{transcript.dropped} answers beyond the {transcript.budget} bytes kept were not scanned")


async def pending_not_presented_as_done(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """No pending task's ``statusMessage`` or model-immediate response claims the action happened."""
    _dropped(run, evidence)
    pending = [task for task in _task_documents(run) if task.get("status") in PENDING]
    if not pending:
        raise Skipped("the run saw no pending task")
    for task in pending:
        for text in model_texts(task):
            if (claim := presents_as_done(text)) is not None:
                raise Failed(f"a {task.get('status')} task is presented as done: {claim[:160]!r}")
    return f"none of {len(pending)} pending task views claims the action happened"


async def envelope_shape(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """Every SEP-2643 envelope of the run is well formed."""
    _dropped(run, evidence)
    seen = 0
    for _, result in _results(run):
        for document in (result, result.get("result")):
            if not isinstance(document, dict) or (found := envelope(document)) is None:
                continue
            seen += 1
            _check_envelope(found)
    if not seen:
        raise Skipped("the run saw no authorization denial envelope")
    return f"{seen} envelopes, each well formed"


def _check_envelope(found: Any) -> None:
    if not isinstance(found, dict):
        raise Failed(f"an envelope is not an object: {str(found)[:160]}")
    if not isinstance(found.get("reason"), str):
        raise Failed(f"an envelope has no reason string: {found}")
    remediation = found.get("remediation")
    if remediation not in (REMEDIATION_AVAILABLE, REMEDIATION_UNAVAILABLE, REMEDIATION_UNDISCLOSED):
        raise Failed(f"an envelope's remediation is {remediation!r}, not available, unavailable or undisclosed")
    hints = found.get("remediationHints")
    if hints is not None and remediation != REMEDIATION_AVAILABLE:
        raise Failed(f"an {remediation} envelope carries remediationHints")
    if hints is not None and (
        not isinstance(hints, list) or not all(isinstance(h, dict) and isinstance(h.get("type"), str) for h in hints)
    ):
        raise Failed(f"remediationHints is not a list of objects with a type: {str(hints)[:160]}")


async def wire_shapes(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """Every answer has the SEP-2663 shape for its method and, for a task, its status."""
    _dropped(run, evidence)
    checked = 0
    for exchange, result in _results(run):
        checked += 1
        kind = result.get("resultType")
        if kind == RESULT_TYPE_TASK and exchange.method != "tools/call":
            raise Failed(f"resultType task on a {exchange.method} answer")
        if exchange.method in _TASK_METHODS and kind != RESULT_TYPE_COMPLETE:
            raise Failed(f"a {exchange.method} answer has resultType {kind!r}, not complete")
        if exchange.method == "tools/call" and kind not in (RESULT_TYPE_TASK, RESULT_TYPE_INPUT_REQUIRED, "complete"):
            raise Failed(f"a synchronous tools/call answer has resultType {kind!r}, not complete")
        if kind == RESULT_TYPE_TASK:
            _check_created(result)
        if exchange.method == "tasks/get":
            _check_status_shape(result, notes)
    return f"{checked} answers, each shaped for its method and status"


def _check_created(result: dict[str, Any]) -> None:
    for key in ("taskId", "status", "createdAt", "lastUpdatedAt"):
        if not isinstance(result.get(key), str):
            raise Failed(f"a CreateTaskResult has no {key} string")
    if "ttlMs" not in result:
        raise Failed("a CreateTaskResult has no ttlMs (it is present even when null)")
    for key in ("ttlMs", "pollIntervalMs"):
        value = result.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
            raise Failed(f"a CreateTaskResult's {key} is {value!r}, not a positive integer")
    stale = sorted({"ttl", "pollInterval", "task", "requestState", "result", "error"} & set(result))
    if stale:
        raise Failed(f"a CreateTaskResult carries {stale}")


def _check_status_shape(task: dict[str, Any], notes: list[str]) -> None:
    status = task.get("status")
    extra = {"result", "error", "inputRequests"} & set(task)
    wanted = set(_STATUS_MEMBERS.get(str(status), ()))
    if extra != wanted:
        raise Failed(f"a {status} task carries {sorted(extra)}, where it carries {sorted(wanted)}")
    if "requestState" in task:
        raise Failed("a task read by tasks/get carries requestState")
    inner = task.get("result")
    if isinstance(inner, dict) and isinstance(inner.get("_meta"), dict) and _RELATED_TASK in inner["_meta"]:
        raise Failed("a task's result carries the removed related-task _meta")
    if status == "failed":
        error = task.get("error")
        if (
            not isinstance(error, dict)
            or not isinstance(error.get("code"), int)
            or not isinstance(error.get("message"), str)
        ):
            raise Failed(f"a failed task's error is not a JSON-RPC error object: {str(error)[:160]}")
        if not task.get("statusMessage"):
            notes.append("a failed task carries no statusMessage (SEP-2663: it SHOULD)")


def estimated_bits(ids: list[str]) -> float:
    """The random bits an id of ``ids`` carries at least, estimated: the positions that vary across the
    ids (all of them, for one id) times the bits of the alphabet they draw from."""
    if len({len(item) for item in ids}) == 1 and len(ids) >= _ENOUGH_IDS:
        varying = [i for i in range(len(ids[0])) if len({item[i] for item in ids}) > 1]
        parts = ["".join(item[i] for i in varying) for item in ids]
    else:
        prefix = len(_common_prefix(ids)) if len(ids) > 1 else 0
        parts = [item[prefix:] for item in ids]
    symbols = set("".join(parts))
    alphabet = 10 if symbols <= set("0123456789") else 16 if symbols <= set("0123456789abcdef") else 0
    alphabet = alphabet or (36 if symbols <= set("0123456789abcdefghijklmnopqrstuvwxyz") else 64)
    return min(len(part) for part in parts) * math.log2(alphabet) if parts else 0.0


def _common_prefix(ids: list[str]) -> str:
    first, last = min(ids), max(ids)
    size = 0
    while size < min(len(first), len(last)) and first[size] == last[size]:
        size += 1
    return first[:size]


async def unguessable_task_ids(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """The task ids of the run are unguessable: not sequential, and about 128 random bits or more."""
    ids = sorted({str(task["taskId"]) for task in _task_documents(run) if isinstance(task.get("taskId"), str)})
    if not ids:
        raise Skipped("the run saw no task")
    bits = estimated_bits(ids)
    evidence.append(f"{len(ids)} task ids, e.g. {ids[:3]}; at least {bits:.0f} random bits each, estimated")
    stems = {re.sub(r"\d+$", "", item) for item in ids}
    numbers = sorted(int(match.group()) for item in ids if (match := re.search(r"\d+$", item)))
    if len(ids) > 1 and len(stems) == 1 and len(numbers) == len(ids) and numbers[-1] - numbers[0] < 10 * len(ids):
        raise Failed(f"the task ids are sequential: {ids[:4]}")
    if bits < MIN_TASK_ID_BITS:
        raise Failed(f"a task id carries about {bits:.0f} random bits, fewer than {MIN_TASK_ID_BITS}: {ids[:3]}")
    return f"{len(ids)} ids, about {bits:.0f} random bits each"


async def approval_stays_private(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """No ``statusMessage`` or model text names the approver or quotes a decision's comment."""
    reviewer = run.options.reviewer
    secrets_ = {comment: "a decision's comment" for comment in run.comments}
    if not secrets_ and not reviewer:
        raise Skipped("the run made no decision")
    for task in _task_documents(run):
        for text in model_texts(task):
            for comment, kind in secrets_.items():
                if comment in text:
                    raise Failed(f"a statusMessage quotes {kind}: {text[:160]!r}")
            if reviewer and re.search(rf"\b{re.escape(reviewer)}\b", text, re.IGNORECASE):
                raise Failed(f"a statusMessage names the approver {reviewer!r}: {text[:160]!r}")
    return "no statusMessage names the approver or quotes a comment"


async def no_backend_artifacts(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """No answer of the run carried a backend request id, binding material, or an operator-named artifact."""
    wanted = {name: "binding material" for name in ARTIFACT_NAMES}
    wanted.update({item: "backend request id" for item in run.backend_ids})
    wanted.update({item: "operator-named artifact" for item in run.options.backend_artifacts})
    _dropped(run, evidence)
    evidence.append(f"searched for {len(wanted)} strings")
    if not run.backend_ids:
        notes.append("the decider named no backend ids (a decider that prints them makes this check stronger)")
    texts = run.transcript.texts()
    leaked = sorted({f"{kind} {value}" for value, kind in wanted.items() for text in texts if value in text})
    if leaked:
        raise Failed(f"answers carried {'; '.join(leaked)}")
    return "no backend artifact in any answer"
