"""The sealed, append-only record that a call was claimed to run: once means once.

The workflow row's phase says whether a call ran, but someone who can write the database can roll a
finished workflow back to ``pending``, or point a later identical call's task at a request that
already ran (and delete its intent row, so nothing ties the task to the request it was submitted
as). The claim therefore writes an :class:`ExecutionFact` in its own transaction, before the tool
runs, keyed twice: by the task's generation and by the request it followed (:func:`request_key`).
A claim that finds a fact for either refuses, whatever the workflow row says: the call does not
run again, and the driver ends the task as an integrity failure.

Each fact is sealed under the binding key to its task and generation, so a fact cannot be written
or edited without the key. It can be deleted: that is caught after the fact by ``audit verify``
(:func:`execution_findings`), which compares the facts with the chain's
``approval.execution_claimed`` events: an event without its fact, a fact whose seal does not
open, and a request or generation claimed twice are each named.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import Connection, or_, select

from mcp_approval.approval.persistence.schema import approval_executions_table
from mcp_approval.errors import MCPApprovalError
from mcp_approval.keyring import BindingCipher

__all__ = [
    "CLAIM_EVENT",
    "ExecutedBeforeError",
    "ExecutionFact",
    "SealOpener",
    "executed_before",
    "executed_requests",
    "execution_findings",
    "record_execution",
    "request_key",
]

_X = approval_executions_table
#: The audit event each claim writes (one per execution).
CLAIM_EVENT = "approval.execution_claimed"


class SealOpener(Protocol):
    """What checks a fact's seal (:class:`~mcp_approval.keyring.BindingCipher` is one)."""

    def open(self, sealed: str, *, record: str) -> dict[str, Any]:
        """The document sealed to ``record``; raises when it does not authenticate."""
        ...


class ExecutedBeforeError(MCPApprovalError, RuntimeError):
    """The claim found that this generation, or the request it follows, already ran: nothing runs."""


def request_key(backend: str, handle: str) -> str:
    """SHA-256 of a backend's name and a request's handle: the key that lets a request run once."""
    return hashlib.sha256(f"{backend}|{handle}".encode()).hexdigest()


@dataclass(frozen=True)
class ExecutionFact:
    """One claimed execution: which task's generation ran which call, on which request.

    Attributes:
        task_id: the task.
        generation: its generation (each one follows its own request).
        backend: the backend holding the request.
        handle: the request's handle at that backend.
        call_scope: the call's dedup scope (principal, tool, arguments).
        call_digest: the digest of the call's arguments.
        worker: the worker that claimed it.
        claimed_at: when (epoch milliseconds).
    """

    task_id: str
    generation: int
    backend: str
    handle: str
    call_scope: str | None
    call_digest: str
    worker: str
    claimed_at: int

    def document(self) -> dict[str, Any]:
        """What the seal covers: every member."""
        return {
            "task_id": self.task_id,
            "generation": self.generation,
            "backend": self.backend,
            "handle": self.handle,
            "call_scope": self.call_scope,
            "call_digest": self.call_digest,
            "worker": self.worker,
            "claimed_at": self.claimed_at,
        }

    @property
    def record(self) -> str:
        """What the seal is bound to: a seal copied to another task's or generation's row does not open."""
        return f"execution|{self.task_id}|{self.generation}"


def executed_before(conn: Connection, task_id: str, generation: int, backend: str, handle: str) -> bool:
    """Whether a fact is stored for this generation of the task or for the request it follows.

    Any row counts, sealed or not: a forged one can only stop a call, never run one.
    """
    found = conn.execute(
        select(_X.c.task_id)
        .where(
            or_(
                (_X.c.task_id == task_id) & (_X.c.generation == generation),
                _X.c.request_key == request_key(backend, handle),
            )
        )
        .limit(1)
    ).first()
    return found is not None


def record_execution(conn: Connection, fact: ExecutionFact, cipher: BindingCipher | None) -> None:
    """Store ``fact`` in the caller's transaction, sealed (unsealed without a cipher: a store used alone)."""
    conn.execute(
        _X.insert(),
        {
            "task_id": fact.task_id,
            "generation": fact.generation,
            "request_key": request_key(fact.backend, fact.handle),
            "backend": fact.backend,
            "handle": fact.handle,
            "call_scope": fact.call_scope,
            "worker": fact.worker,
            "claimed_at": fact.claimed_at,
            "seal": "" if cipher is None else cipher.seal(fact.document(), record=fact.record),
        },
    )


def execution_findings(
    conn: Connection, claims: list[tuple[int, str, dict[str, Any]]], cipher: SealOpener | None
) -> list[str]:
    """What does not hold between the execution facts and the chain's claim events, one line each.

    Args:
        conn: a connection to the store.
        claims: the chain's ``approval.execution_claimed`` events as ``(seq, task id, data)``; one
            marked ``recorded`` (written with its fact, since revision approval_0005) needs its fact.
        cipher: the binding keys, to check each fact's seal; ``None`` checks everything else.
    """
    findings: list[str] = []
    facts = {(row.task_id, int(row.generation)): row for row in conn.execute(select(_X))}
    by_request: dict[tuple[str, str], list[str]] = defaultdict(list)
    by_generation: dict[tuple[str, int], list[int]] = defaultdict(list)
    for seq, task_id, data in claims:
        generation = int(data.get("generation", 0))
        by_generation[(task_id, generation)].append(seq)
        request = (str(data.get("backend")), str(data.get("request")))
        by_request[request].append(f"{task_id} generation {generation} (event {seq})")
        if data.get("recorded") and (task_id, generation) not in facts:
            findings.append(
                f"task {task_id} generation {generation} was claimed to run (event {seq}) "
                "but has no sealed execution record"
            )
    for (backend, handle), runs in sorted(by_request.items()):
        if len(runs) > 1:
            findings.append(f"request {handle} ({backend}) executed {len(runs)} times: {', '.join(runs)}")
    for (task_id, generation), seqs in sorted(by_generation.items()):
        if len(seqs) > 1:
            events = ", ".join(str(seq) for seq in seqs)
            findings.append(f"task {task_id} generation {generation} executed {len(seqs)} times (events {events})")
    for (task_id, generation), row in sorted(facts.items()):
        failure = _seal_failure(row, cipher)
        if failure is not None:
            findings.append(f"the execution record of task {task_id} generation {generation} {failure}")
    return findings


def executed_requests(conn: Connection) -> list[tuple[str, str]]:
    """``(backend, handle)`` of every request a stored fact says ran."""
    return [(row.backend, row.handle) for row in conn.execute(select(_X.c.backend, _X.c.handle))]


def _seal_failure(row: Any, cipher: SealOpener | None) -> str | None:
    """Why a stored fact does not match its seal, or ``None`` (also when there are no keys to check it)."""
    if cipher is None:
        return None
    fact = ExecutionFact(
        row.task_id,
        int(row.generation),
        row.backend,
        row.handle,
        row.call_scope,
        "",
        row.worker,
        int(row.claimed_at),
    )
    try:
        sealed = cipher.open(row.seal or "", record=fact.record)
    except Exception:  # any failure to authenticate is the same verdict
        return "does not authenticate under these binding keys"
    expected = {**fact.document(), "call_digest": sealed.get("call_digest")}
    if sealed != expected or row.request_key != request_key(row.backend, row.handle):
        return "does not match its seal"
    return None
