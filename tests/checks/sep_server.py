"""A minimal approval-gated MCP server written from the text of SEP-2848, SEP-2643 and SEP-2663.

It exists to test the conformance kit: faithful by default, it breaks exactly one statement when
told a mutant's name (:mod:`tests.checks.mutants`), and differs where the SEPs allow when given a
variant's settings (wording, input channel, listen, expiry, no SEP-2643, -32003).

One process serves many independent instances: ``POST /instances`` with the settings returns an
id, and ``/i/<id>/mcp`` is that instance's MCP endpoint; ``/i/<id>/decide`` and ``/i/<id>/policy``
are what an operator's decider and policy hook would reach (``fixture_outside.py``). The gated
tool is ``pay(to, amount)``: an amount of 0 or less is denied outright, above 100 it needs an
approval. ``ledger`` lists every execution with its tool and arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import itertools
import json
import secrets
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tests.checks.sep_wording import WORDINGS, Wording

TASKS = "io.modelcontextprotocol/tasks"
APPROVAL = "io.modelcontextprotocol/tool-approval"
DENIALS = "io.modelcontextprotocol/structured-authorization-denials"
ENVELOPE = "io.modelcontextprotocol/authorization"
DISPOSITION = "io.modelcontextprotocol/tool-approval-disposition"
IMMEDIATE = "io.modelcontextprotocol/model-immediate-response"
CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
CONTEXT_ID = "io.modelcontextprotocol/authorization-context-id"
PRINCIPALS = {"one-token": "one", "two-token": "two", "three-token": "three"}
#: A principal whose token lacks the ``payments`` scope ``pay`` needs (a credential remedy, SEP-2643).
UNDERSCOPED = "three"
PENDING = ("working", "input_required")
TERMINAL = ("completed", "failed", "cancelled")
#: How long a request waits for a decision, and a terminal result stays readable (seconds).
REQUEST_DEADLINE_S = 3600
RESULT_RETENTION_S = 600
FORM = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "Why is this payment needed?",
        "requestedSchema": {"type": "object", "properties": {"reason": {"type": "string"}}, "required": ["reason"]},
    },
}


#: The mutants that keep an ended task's request open, and the status it ended in.
_LATE = {"runs-after-cancel": "cancelled", "runs-after-expiry": "completed", "late-approval-runs-denied": "completed"}


class Challenge(Exception):
    """An HTTP authorization challenge instead of a JSON-RPC answer."""

    def __init__(self, status: int, header: str) -> None:
        super().__init__(header)
        self.status, self.header = status, header


class RpcError(Exception):
    """A JSON-RPC error answer."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


@dataclass
class Settings:
    """An instance: at most one mutant, and the variant settings the SEPs leave open."""

    mutant: str = "none"
    wording: str = "plain"
    #: ``during`` (input_required on the task), ``before`` (an input round on tools/call), ``none``.
    inputs: str = "during"
    #: ``on`` (acknowledges owned ids, notifies them), ``none`` (acknowledges none), ``off`` (-32601).
    listen: str = "on"
    denials: bool = True
    expire_s: float | None = None
    missing_capability: int = -32021

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Settings:
        return cls(**{key: value for key, value in data.items() if key in cls.__dataclass_fields__})


@dataclass
class Task:
    """One approval task: the immutable call binding, the request, the execution state."""

    task_id: str
    owner: str
    arguments: dict[str, Any]
    created: float
    status: str = "working"
    request: str | None = None
    result: dict[str, Any] | None = None
    ttl_ms: int = (REQUEST_DEADLINE_S + RESULT_RETENTION_S) * 1000
    updated: float = 0.0
    message: str = ""
    asked: list[str] = field(default_factory=list)
    claimed: bool = False
    decided_by: str = ""
    comment: str = ""
    #: The task created just before this one (what the shows-other-result mutant shows).
    previous: str | None = None


def now_iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def canonical(arguments: Any) -> str:
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"))


class Instance:
    """One server: its tasks, approval requests, policy, ledger and listeners."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.m = settings.mutant
        self.words: Wording = WORDINGS[settings.wording]
        self.tasks: dict[str, Task] = {}
        self.ledger: list[dict[str, Any]] = []
        self.denied_calls: set[str] = set()
        self.revoked: set[str] = set()
        self.contexts: dict[str, str] = {}
        self.listeners: list[tuple[str, set[str], asyncio.Queue[dict[str, Any]]]] = []
        self.key = secrets.token_bytes(32)
        self.counter = itertools.count(1)
        self.last_created: Task | None = None
        #: The task each ``tools/call`` created, by (principal, request id): what notifications/cancelled names.
        self.created_by: dict[tuple[str, Any], str] = {}
        #: Tasks not yet readable (the not-readable-at-once mutant).
        self.hidden: set[str] = set()

    # -- policy ---------------------------------------------------------------------------------

    def evaluate(self, owner: str, arguments: dict[str, Any], *, approved: bool) -> str:
        """``allow``, ``deny`` (final) or ``requestable``: the current policy, fresh each time."""
        if owner in self.revoked and self.m != "ignores-revoked-principal":
            return "deny"
        if canonical(arguments) in self.denied_calls and self.m != "ignores-policy-change":
            return "deny"
        amount = arguments.get("amount")
        if not isinstance(amount, int | float) or amount <= 0:
            return "deny"
        if amount <= 100 or approved:
            return "allow"
        return "requestable"

    def execute(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Run the tool once (the side effect the ledger records); its result."""
        ran = dict(arguments)
        if self.m == "coerces-arguments":
            ran["amount"] = str(arguments.get("amount"))
        self.ledger.append({"tool": "pay", "arguments": ran})
        if "fail" in str(arguments.get("to")):
            return {"failed": True, "text": self.words.failed}
        return {"failed": False, "text": self.words.paid.format(amount=ran.get("amount"), to=ran.get("to"))}

    # -- the task's views -----------------------------------------------------------------------

    def create(self, owner: str, arguments: dict[str, Any]) -> Task:
        sequential = self.m == "sequential-task-ids"
        task_id = f"task-{next(self.counter):06d}" if sequential else secrets.token_urlsafe(24)
        moment = time.time()
        task = Task(task_id, owner, dict(arguments), moment, updated=moment)
        if self.m == "short-ttl":
            task.ttl_ms = 2000
        elif self.settings.expire_s is not None:
            task.ttl_ms = int((self.settings.expire_s + RESULT_RETENTION_S) * 1000)
        task.message = self.words.pending
        if self.m == "echoes-arguments":
            task.message = f"pay to {arguments.get('to')} needs approval."
        if self.m == "pending-presented-done":
            task.message = "Payment completed."
        self.tasks[task_id] = task
        task.previous = None if self.last_created is None else self.last_created.task_id
        self.last_created = task
        if self.settings.inputs == "during" and self.m != "skips-input":
            task.status, task.asked = "input_required", ["reason"]
        else:
            self.submit(task)
        if self.m == "executes-early":
            self.execute(arguments)
        return task

    def submit(self, task: Task) -> None:
        task.status, task.request = "working", "req-" + secrets.token_hex(8)
        self.touch(task)

    def envelope(self, remediation: str, *, hints: bool) -> dict[str, Any]:
        found: dict[str, Any] = {"reason": "insufficient_authorization", "remediation": remediation}
        if hints:
            found["remediationHints"] = [{"type": "task"}]
        return found

    def document(self, task: Task, *, read: bool = False) -> dict[str, Any]:
        """The task as ``tasks/get`` reads it (SEP-2663 DetailedTask, status-shaped); ``read``: for tasks/get."""
        self.lapse(task)
        created = task.created + (1.0 if self.m == "created-at-changes" and read else 0.0)
        shown: dict[str, Any] = {
            "taskId": task.task_id,
            "status": task.status,
            "createdAt": now_iso(created),
            "lastUpdatedAt": now_iso(task.updated),
            "ttlMs": task.ttl_ms,
            "pollIntervalMs": 100,
        }
        if task.message:
            shown["statusMessage"] = task.message
        meta: dict[str, Any] = {}
        if task.status in PENDING and self.settings.denials and self.m != "envelope-not-repeated":
            meta[ENVELOPE] = self.envelope("available", hints=True)
            if self.m == "envelope-without-reason":
                del meta[ENVELOPE]["reason"]
        if task.status == "completed" and self.m == "executed-keeps-envelope" and task.claimed:
            meta[ENVELOPE] = self.envelope("available", hints=True)
        if self.m == "leaks-request-id" and task.request:
            meta["binding_token"] = task.request
        if meta:
            shown["_meta"] = meta
        if task.status == "input_required":
            shown["inputRequests"] = {key: FORM for key in task.asked}
        if task.status == "completed" and task.result is not None:
            shown["result"] = task.result
        if task.status == "working" and self.m == "working-carries-result":
            shown["result"] = None
        if task.status == "failed":
            shown["error"] = {"code": -32603, "message": "the payment could not be made"}
        return shown

    def created_view(self, task: Task) -> dict[str, Any]:
        """The ``CreateTaskResult``: the task, flat, with ``resultType: task``."""
        shown = {"resultType": "task", **self.document(task)}
        shown.pop("inputRequests", None)
        if self.m == "no-status-message":
            shown.pop("statusMessage", None)
        if self.m == "no-envelope-on-create":
            shown.pop("_meta", None)
        elif self.settings.denials:
            shown.setdefault("_meta", {})[IMMEDIATE] = self.words.immediate
        if self.m == "legacy-ttl-field":
            shown["ttl"] = shown.pop("ttlMs")
        return shown

    def touch(self, task: Task) -> None:
        task.updated = time.time()
        if task.status in TERMINAL:  # retention covers the result from terminalization on
            needed = int((task.updated - task.created + RESULT_RETENTION_S) * 1000)
            task.ttl_ms = max(task.ttl_ms, needed) if self.m != "short-ttl" else task.ttl_ms
        for principal, ids, queue in self.listeners:
            if task.task_id in ids and principal == task.owner:
                view = self.document(task)
                if self.m == "notification-differs":
                    view["ttlMs"] = 1
                queue.put_nowait(view)

    # -- outcomes -------------------------------------------------------------------------------

    def complete(self, task: Task, text: str, disposition: str, *, error: bool, envelope: bool) -> None:
        meta: dict[str, Any] = {DISPOSITION: disposition}
        if self.m == "no-disposition" and disposition == "approved-executed":
            meta = {}
        if envelope and self.settings.denials:
            meta[ENVELOPE] = self.envelope(
                "available" if self.m == "denial-envelope-available" else "unavailable",
                hints=self.m == "unavailable-with-hints",
            )
        task.result = {"resultType": "complete", "content": [{"type": "text", "text": text}], "isError": error}
        task.result["_meta"] = meta
        task.status = "completed"
        task.request = None
        self.touch(task)

    def deny(self, task: Task, text: str) -> None:
        if self.m == "denial-as-failed":
            task.status, task.request = "failed", None
            self.touch(task)
            return
        self.complete(task, text, "denied-not-executed", error=True, envelope=True)

    def lapse(self, task: Task) -> None:
        """A request that outlived its deadline ends the task as a denial (SEP-2848's lifecycle table)."""
        expire = self.settings.expire_s
        if expire is None or task.status not in PENDING or time.time() - task.created < expire:
            return
        if self.m == "expiry-ends-failed":
            task.status, task.request = "failed", None
            self.touch(task)
            return
        kept = task.request
        self.deny(task, self.words.expired)
        if self.m == "runs-after-expiry":
            task.request = kept

    def decide(self, decision: str, arguments: dict[str, Any], reviewer: str, comment: str) -> str | None:
        """An out-of-band decision on the one pending request of ``arguments``: its id, or ``None``."""
        found = [t for t in self.tasks.values() if self.decidable(t) and canonical(t.arguments) == canonical(arguments)]
        if len(found) != 1:
            return None
        task = found[0]
        request = str(task.request)
        task.decided_by, task.comment = reviewer, comment
        if task.status != "working":  # a withdrawn or ended request still answered (the mutants that allow it)
            if decision == "approve":
                self.execute(task.arguments)
            return request
        if decision == "deny":
            self.deny(task, self.words.denied if self.m != "meta-only-denial" else "Request closed.")
            if self.m == "late-approval-runs-denied":
                task.request = request
        else:
            self.approve(task)
        self.after_decision(task)
        return request

    def decidable(self, task: Task) -> bool:
        """A request a decider can find: a pending one (or, for three mutants, one that ended)."""
        if task.request is None:
            return False
        return task.status == "working" or _LATE.get(self.m) == task.status

    def approve(self, task: Task) -> None:
        """Re-evaluate with the approval as an input and current policy, claim once, execute."""
        if self.evaluate(task.owner, task.arguments, approved=True) != "allow":
            self.deny(task, self.words.denied)
            return
        task.claimed = True
        outcome = self.execute(task.arguments)
        if self.m == "runs-twice":
            self.execute(task.arguments)
        if outcome["failed"]:
            if self.m == "execution-error-failed":
                task.status, task.request = "failed", None
                self.touch(task)
                return
            envelope = self.m == "execution-error-with-envelope"
            self.complete(task, outcome["text"], "execution-error", error=True, envelope=envelope)
            return
        text = outcome["text"]
        if self.m == "executed-body-says-not-run":
            text = "Approved, but the tool did not run."
        if self.m == "shows-other-result" and task.previous in self.tasks:
            other = self.tasks[str(task.previous)]
            text = self.words.paid.format(amount=other.arguments.get("amount"), to=other.arguments.get("to"))
        self.complete(task, text, "approved-executed", error=False, envelope=False)

    def after_decision(self, task: Task) -> None:
        if self.m == "status-names-approver":
            task.message = f"Approved by {task.decided_by}."
        elif self.m == "status-quotes-comment":
            task.message = f"Reviewer said: {task.comment}"
        elif task.status in TERMINAL:
            task.message = ""
        if self.m == "denial-says-will-run" and task.result and task.result["isError"]:
            task.result["content"] = [{"type": "text", "text": "Denied for now; the payment will run once approved."}]

    def binding(self, owner: str, arguments: dict[str, Any]) -> str:
        """The ``requestState`` of an input round: the call binding, signed (SEP-2322 / SEP-2848)."""
        body = canonical({"owner": owner, "arguments": arguments})
        signature = hmac.new(self.key, body.encode(), hashlib.sha256).hexdigest()
        return json.dumps({"binding": body, "sig": signature})

    def bound(self, state: Any, owner: str, arguments: dict[str, Any]) -> bool:
        try:
            parsed = json.loads(state)
            body, signature = parsed["binding"], parsed["sig"]
        except (TypeError, ValueError, KeyError):
            return False
        expected = hmac.new(self.key, body.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(signature, expected):
            return False
        return self.m == "mrtr-retry-unbound" or body == canonical({"owner": owner, "arguments": arguments})


def main() -> None:
    from tests.checks.sep_server_app import serve

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    serve(parser.parse_args().port)


if __name__ == "__main__":
    main()
