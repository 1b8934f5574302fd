"""An append-only, hash-chained audit log of approval events, kept in the ``audit_events`` table.

The audit log belongs to the storage layer (every layer above records into it); its tables have
their own migration history (:data:`AUDIT_MIGRATIONS`, revisions in ``audit_schema_versions/``).

Events are only ever inserted. :meth:`AuditLog.record_in` writes inside a transaction the
caller already holds, so a state change and the event describing it commit (or roll back)
together; :meth:`AuditLog.record` is the stand-alone form.

The events form one hash chain. Each has a position ``seq`` (1, 2, ...), the previous event's
hash ``prev_hash`` (:data:`GENESIS_HASH` for the first) and its own ``hash``, the SHA-256 of
the canonical JSON of all its fields (:func:`event_hash`); ``audit_chain_head`` holds the last
position and hash.

A request's transaction only inserts its events, unlinked (``seq`` NULL): it takes no lock
beyond its own rows and hashes nothing, so concurrent writers never wait for each other here.
:meth:`AuditLog.link` links committed unlinked events afterwards, in batches, each batch a
short transaction of its own that locks the head row (``SELECT ... FOR UPDATE`` on PostgreSQL;
SQLite write transactions already exclude each other), so linkers in one process or many extend
one chain, and a unique index on ``seq`` refuses a fork outright. It runs in the background in
every serving process (:class:`~mcp_approval.storage.audit_linker.AuditLinker`) and before
anything reads the chain (:meth:`AuditLog.head`, :meth:`~AuditLog.events`,
:meth:`~AuditLog.export`, :meth:`~AuditLog.verify`), so a reader sees every event committed
before it asked, linked.

Chain order is the order events became visible to the linker, which may differ from
``event_id`` order (a long transaction can commit late); everything that reads the chain reads
it by ``seq``. An event written by a transaction that saw another's committed effect (an
execution after the decision allowing it) is always linked after it.
:meth:`AuditLog.verify` walks the chain and names the first broken link, or the first execution
its request's decisions do not allow (:mod:`mcp_approval.storage.audit_rules`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import weakref
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    and_,
    func,
    select,
    true,
)

from mcp_approval.clock import Clock, SystemClock
from mcp_approval.errors import MCPApprovalError
from mcp_approval.storage.audit_chain import (
    GENESIS_HASH,
    LINK_BATCH,
    audit_chain_head_table,
    audit_events_table,
    canonical_json,
    event_hash,
    has_unlinked,
    head,
    link_batch,
)
from mcp_approval.storage.audit_rules import ExecutionRules, RuleDecision
from mcp_approval.storage.database import Database
from mcp_approval.storage.migrations import Migrations

__all__ = [
    "AUDIT_MIGRATIONS",
    "GENESIS_HASH",
    "AuditEvent",
    "AuditFilter",
    "AuditLog",
    "ChainBreak",
    "ChainVerification",
    "audit_chain_head_table",
    "audit_events_table",
    "event_hash",
]

#: The audit tables' history; release schema version 2 created ``audit_events``.
AUDIT_MIGRATIONS = Migrations("audit", Path(__file__).with_name("audit_schema_versions"), legacy=((2, "audit_0001"),))

_A = audit_events_table
_H = audit_chain_head_table
_PAGE = 1000


@dataclass(frozen=True)
class AuditEvent:
    """One recorded event.

    Attributes:
        event_id: the event's row id (increasing in insertion order).
        at: when it happened (epoch ms).
        kind: what happened, e.g. ``approval.submitted``.
        subject: the approval request or task it is about.
        actor: who caused it (a principal, a reviewer, ``resolver:<template>``), if anyone.
        data: further details.
        seq: its position in the hash chain (``None`` until it is linked, after its commit).
        prev_hash: the hash of the event at ``seq - 1`` (:data:`GENESIS_HASH` at 1).
        hash: :func:`event_hash` of this event.
    """

    event_id: int
    at: int
    kind: str
    subject: str | None
    actor: str | None
    data: Mapping[str, Any] = field(default_factory=dict)
    seq: int | None = None
    prev_hash: str | None = None
    hash: str | None = None

    def as_json(self) -> dict[str, Any]:
        """The event as a JSON object (one line of ``mcp-approval audit export``)."""
        return {
            "seq": self.seq,
            "event_id": self.event_id,
            "at": self.at,
            "kind": self.kind,
            "subject": self.subject,
            "actor": self.actor,
            "data": dict(self.data),
            "prev_hash": self.prev_hash,
            "hash": self.hash,
        }


@dataclass(frozen=True)
class AuditFilter:
    """Which events an export selects; every criterion given must hold.

    Attributes:
        since_ms: events at or after this time (epoch ms).
        until_ms: events before this time (epoch ms).
        subject: events about this approval request or task.
        actor: events caused by this principal or reviewer.
        tool: events about a request or task for this tool (its subjects are those with an
            event whose data names the tool).
    """

    since_ms: int | None = None
    until_ms: int | None = None
    subject: str | None = None
    actor: str | None = None
    tool: str | None = None

    def where(self) -> ColumnElement[bool]:
        """The SQL condition of every criterion but ``tool`` (which needs the events' data)."""
        conditions: list[ColumnElement[bool]] = []
        if self.since_ms is not None:
            conditions.append(_A.c.at >= self.since_ms)
        if self.until_ms is not None:
            conditions.append(_A.c.at < self.until_ms)
        if self.subject is not None:
            conditions.append(_A.c.subject == self.subject)
        if self.actor is not None:
            conditions.append(_A.c.actor == self.actor)
        return and_(true(), *conditions)


@dataclass(frozen=True)
class ChainBreak:
    """The first place the chain does not hold.

    Attributes:
        event_id: the row at fault (``None`` when the fault is a missing tail).
        seq: its chain position, as stored.
        reason: what does not match, in words.
    """

    event_id: int | None
    seq: int | None
    reason: str


@dataclass(frozen=True)
class ChainVerification:
    """What :meth:`AuditLog.verify` found.

    Attributes:
        checked: the last position found linked (from the chain's start, how many events were checked).
        head_seq: the last position the head row records.
        head_hash: the hash the head row records (anchor it elsewhere to detect a rewritten tail).
        broken: the first broken link, or ``None`` if the whole chain holds.
        rule_decisions: each decision a similar-call rule made, in chain order (:meth:`AuditLog.verify`
            only; checked up to ``broken``).
    """

    checked: int
    head_seq: int
    head_hash: str
    broken: ChainBreak | None = None
    rule_decisions: tuple[RuleDecision, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether every event is linked and the head names the last one."""
        return self.broken is None


#: Who is told of events recorded on each database: every audit log on it (a backend's, the
#: server's) wakes the linkers of that database.
_RECORDED: weakref.WeakKeyDictionary[Database, list[Callable[[], None]]] = weakref.WeakKeyDictionary()


class AuditLog:
    """Appends audit events to a database, reads them back and verifies their chain.

    Args:
        database: a database migrated with :data:`AUDIT_MIGRATIONS`.
        clock: the source of event times for :meth:`record`.
    """

    def __init__(self, database: Database, clock: Clock | None = None) -> None:
        self._database = database
        self._clock = clock or SystemClock()

    def when_recorded(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` after each event any audit log of this database inserts; returns the call that stops it.

        It runs inside the recording transaction, before its commit (and once more after the
        commit of a :meth:`record`), on whichever thread runs it: it may only note that events
        are on their way (an :class:`~mcp_approval.storage.audit_linker.AuditLinker` wakes up).
        """
        callbacks = _RECORDED.setdefault(self._database, [])
        callbacks.append(callback)

        def stop() -> None:
            if callback in callbacks:
                callbacks.remove(callback)

        return stop

    async def record(
        self, kind: str, *, subject: str | None = None, actor: str | None = None, data: Mapping[str, Any] | None = None
    ) -> None:
        """Append one event in its own transaction."""
        now = self._clock.now_ms()
        await self._database.write(
            lambda conn: self.record_in(conn, now, kind, subject=subject, actor=actor, data=data)
        )
        for recorded in _RECORDED.get(self._database, ()):  # once more, now that it has committed
            recorded()

    def record_in(
        self,
        conn: Connection,
        now_ms: int,
        kind: str,
        *,
        subject: str | None = None,
        actor: str | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> None:
        """Append one event inside the caller's write transaction (it commits with the caller's writes).

        The event is inserted unlinked: no lock is taken and nothing is hashed here. Once it
        has committed, :meth:`link` (run by every reader of the chain, and in the background
        by an :class:`~mcp_approval.storage.audit_linker.AuditLinker`) links it.
        """
        conn.execute(
            _A.insert(),
            {
                "at": now_ms,
                "kind": kind,
                "subject": subject,
                "actor": actor,
                "data_json": canonical_json(dict(data or {})),
            },
        )
        for recorded in _RECORDED.get(self._database, ()):
            recorded()

    async def link(self, *, background: bool = False) -> int:
        """Link every committed unlinked event into the chain now, in batches; how many were linked.

        Each batch is one short transaction holding the head row's lock; one that fails or is
        interrupted leaves its events unlinked for the next call, and links nothing.
        ``background``: stop, instead of waiting, when another linker holds the head row (it is
        linking them already); a reader, which must see every committed event linked, waits.
        """
        linked = 0
        step = functools.partial(link_batch, yield_to_others=background)
        while await self._database.read(has_unlinked):
            batch = await self._database.write(step)
            linked += batch
            if batch < LINK_BATCH:
                break
        return linked

    async def head(self) -> tuple[int, str]:
        """The chain's last position and hash, after linking what has committed (``(0, GENESIS_HASH)`` when empty)."""
        await self.link()
        return await self._database.read(head)

    async def events(self, subject: str | None = None, limit: int = 100) -> list[AuditEvent]:
        """The latest ``limit`` events (about ``subject``, if given), oldest first, linked first."""
        await self.link()

        def read(conn: Connection) -> list[AuditEvent]:
            query = select(_A).order_by(_A.c.event_id.desc()).limit(limit)
            if subject is not None:
                query = query.where(_A.c.subject == subject)
            rows = conn.execute(query).mappings().all()
            return [_event(dict(row)) for row in reversed(rows)]

        return await self._database.read(read)

    async def export(self, selection: AuditFilter | None = None, *, after_seq: int = 0) -> AsyncIterator[AuditEvent]:
        """The events ``selection`` picks, in chain order from position ``after_seq + 1``, read a page at a time.

        Every event committed before the call is linked first, so all of them are exported.
        """
        await self.link()
        selection = selection or AuditFilter()
        subjects = await self._subjects_of_tool(selection.tool) if selection.tool is not None else None
        where = selection.where()
        after = after_seq
        while True:
            page = await self._database.read(functools.partial(_linked_page, where=where, after=after))
            for event in page:
                if subjects is None or event.subject in subjects:
                    yield event
            if len(page) < _PAGE:
                return
            after = page[-1].seq or after

    async def _subjects_of_tool(self, tool: str) -> set[str]:
        found: set[str] = set()
        async for event in self.export():
            if event.subject is not None and event.data.get("tool") == tool:
                found.add(event.subject)
        return found

    async def verify(self, anchor: tuple[int, str] | None = None) -> ChainVerification:
        """Walk the chain from its start; report the first event that is not linked as recorded.

        Every event committed before the call is linked first. Checked: positions run 1, 2, ...
        without a gap; each event's ``prev_hash`` is its predecessor's hash; each ``hash`` is
        :func:`event_hash` of the stored fields; no stored event is past the head; the head row
        names the last event. With ``anchor``, a
        ``(seq, hash)`` kept outside the database (an earlier head), the event at that position
        must still have that hash: this detects a tail rewritten with the hashes recomputed.
        Every execution must follow the decisions its request's rules need, in chain order
        (:class:`~mcp_approval.storage.audit_rules.ExecutionRules`), and every decision a
        similar-call rule made must follow the rule's creation, precede its revocation and stay
        within its use count; each such decision is named in ``rule_decisions``.
        """
        await self.link()
        anchored = dict([anchor]) if anchor is not None else {}
        rules = ExecutionRules()
        found = await self._walk(0, GENESIS_HASH, anchored, rules)
        return dataclasses.replace(found, rule_decisions=tuple(rules.rule_decisions))

    async def verify_since(self, anchors: Iterable[tuple[int, str]]) -> ChainVerification:
        """Walk the chain from the earliest of ``anchors`` (earlier heads kept outside the database) to its head.

        What an anchor writer checks before it anchors a new head, at the cost of the events
        added since: every anchored event is still at its position with its hash, every link
        from the earliest anchor on holds, nothing is stored past the head, and the head names
        the last event. ``checked`` is then the last position found linked. Executions are not
        checked against their decisions here (that needs the whole history: :meth:`verify`);
        anchoring such an execution keeps the evidence, it hides nothing. Without anchors the
        whole chain is walked.
        """
        await self.link()
        anchored = dict(anchors)
        start = min(anchored, default=0)
        head_seq, head_hash = await self._database.read(head)
        if start > head_seq:
            reason = _before_anchor(head_seq, max(anchored))
            return ChainVerification(head_seq, head_seq, head_hash, ChainBreak(None, max(anchored), reason))
        if start == 0:
            return await self._walk(0, GENESIS_HASH, anchored, None)
        # The anchored event's own link is taken as stored: its hash, compared with the anchor's, vouches for it.
        prev = await self._database.read(functools.partial(_prev_hash_at, seq=start))
        return await self._walk(start - 1, prev or "", anchored, None)

    async def hashes_at(self, positions: Iterable[int]) -> dict[int, tuple[int, str]]:
        """The event id and hash stored at each of ``positions`` that holds a linked event."""
        await self.link()
        wanted = sorted(set(positions))
        found: dict[int, tuple[int, str]] = {}
        for start in range(0, len(wanted), _PAGE):
            chunk = wanted[start : start + _PAGE]
            found.update(await self._database.read(functools.partial(_hashes_at, positions=chunk)))
        return found

    async def _walk(
        self, after: int, expected_prev: str, anchored: Mapping[int, str], rules: ExecutionRules | None
    ) -> ChainVerification:
        """Check every link from position ``after + 1`` (whose predecessor's hash is ``expected_prev``) to the head."""
        head_seq, head_hash = await self._database.read(head)
        checked = after
        if anchored.get(0, GENESIS_HASH) != GENESIS_HASH:
            reason = "the anchor at position 0 (the empty chain) does not have the empty chain's hash"
            return ChainVerification(checked, head_seq, head_hash, ChainBreak(None, 0, reason))
        while checked < head_seq:
            read_page = functools.partial(_stored_page, after=checked, through=head_seq)
            page = await self._database.read(read_page)
            if not page:
                break
            for event, stored in page:
                broken = (
                    _text_fault(event, stored)
                    or _link_fault(event, checked + 1, expected_prev)
                    or _anchor_fault(event, anchored)
                    or (_rules_fault(event, rules) if rules is not None else None)
                )
                if broken is not None:
                    return ChainVerification(checked, head_seq, head_hash, broken)
                expected_prev, checked = event.hash or "", checked + 1
        if checked < head_seq:
            reason = f"the head records {head_seq} events but the chain ends at {checked}: its tail was deleted"
            return ChainVerification(checked, head_seq, head_hash, ChainBreak(None, checked + 1, reason))
        if anchored and max(anchored) > checked:
            reason = _before_anchor(checked, max(anchored))
            return ChainVerification(checked, head_seq, head_hash, ChainBreak(None, max(anchored), reason))
        if expected_prev != head_hash:
            reason = "the head's hash is not the last event's hash"
            return ChainVerification(checked, head_seq, head_hash, ChainBreak(None, head_seq, reason))
        stray = await self._database.read(lambda conn: _outside_chain(conn, head_seq))
        return ChainVerification(checked, head_seq, head_hash, stray)


def _before_anchor(end: int, anchored: int) -> str:
    return f"the chain ends at {end}, before the anchored position {anchored}: it was truncated, wiped or rewritten"


def _prev_hash_at(conn: Connection, seq: int) -> str | None:
    return conn.execute(select(_A.c.prev_hash).where(_A.c.seq == seq)).scalar_one_or_none()


def _hashes_at(conn: Connection, positions: list[int]) -> dict[int, tuple[int, str]]:
    query = select(_A.c.seq, _A.c.event_id, _A.c.hash).where(_A.c.seq.in_(positions))
    return {int(seq): (int(event_id), str(digest)) for seq, event_id, digest in conn.execute(query)}


def _linked_page(
    conn: Connection, where: ColumnElement[bool], after: int, through: int | None = None
) -> list[AuditEvent]:
    query = select(_A).where(where, _A.c.seq > after).order_by(_A.c.seq).limit(_PAGE)
    if through is not None:
        query = query.where(_A.c.seq <= through)
    return [_event(dict(row)) for row in conn.execute(query).mappings()]


def _stored_page(conn: Connection, after: int, through: int) -> list[tuple[AuditEvent, str]]:
    """The linked events after position ``after``, each with its ``data`` as stored (for :func:`_text_fault`)."""
    query = select(_A).where(_A.c.seq > after, _A.c.seq <= through).order_by(_A.c.seq).limit(_PAGE)
    page: list[tuple[AuditEvent, str]] = []
    for row in conn.execute(query).mappings():
        fields, stored = dict(row), row["data_json"] or "{}"
        try:
            parsed = json.loads(stored)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            fields["data_json"] = "{}"  # reported by _text_fault, not raised here
        page.append((_event(fields), stored))
    return page


class _DuplicateKeyError(MCPApprovalError, ValueError):
    """A JSON object names one key twice: readers disagree on which value it holds."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise _DuplicateKeyError(next(key for key in keys if keys.count(key) > 1))
    return dict(pairs)


def _text_fault(event: AuditEvent, stored: str) -> ChainBreak | None:
    """Why the stored ``data`` of ``event`` is not exactly the canonical JSON it was written as, or ``None``.

    The hash covers the parsed value; a text that parses to it but is not its canonical form
    (a duplicate key, which ``json.loads`` reads as the last value and SQL's ``json_extract``
    may read as the first, or anything else rewritten) means the row was written outside the log.
    """
    try:
        parsed = json.loads(stored, object_pairs_hook=_unique_keys)
    except _DuplicateKeyError as exc:
        reason = f"its data names the key {str(exc)!r} twice: it was edited so that readers disagree"
        return ChainBreak(event.event_id, event.seq, reason)
    except ValueError:
        return ChainBreak(event.event_id, event.seq, "its data is not JSON: it was edited")
    if not isinstance(parsed, dict):
        return ChainBreak(event.event_id, event.seq, "its data is not a JSON object: it was edited")
    if canonical_json(parsed) != stored:
        return ChainBreak(event.event_id, event.seq, "its data is not stored as canonical JSON: it was edited")
    return None


def _link_fault(event: AuditEvent, expected_seq: int, expected_prev: str) -> ChainBreak | None:
    """Why ``event`` is not the valid link at ``expected_seq`` after ``expected_prev``, or ``None``."""
    if event.seq != expected_seq:
        reason = f"position {expected_seq} is missing (the next stored is {event.seq}): an event was deleted"
        return ChainBreak(event.event_id, event.seq, reason)
    if event.prev_hash != expected_prev:
        reason = "its prev_hash is not the hash of the event before it: an event before it was changed or replaced"
        return ChainBreak(event.event_id, event.seq, reason)
    recomputed = event_hash(
        seq=expected_seq,
        prev_hash=expected_prev,
        event_id=event.event_id,
        at=event.at,
        kind=event.kind,
        subject=event.subject,
        actor=event.actor,
        data=event.data,
    )
    if event.hash != recomputed:
        return ChainBreak(event.event_id, event.seq, "its stored fields do not match its hash: it was edited")
    return None


def _anchor_fault(event: AuditEvent, anchored: Mapping[int, str]) -> ChainBreak | None:
    if event.seq is None or event.seq not in anchored or event.hash == anchored[event.seq]:
        return None
    reason = "its hash is not the anchored one: the chain was rewritten at or before this event"
    return ChainBreak(event.event_id, event.seq, reason)


def _rules_fault(event: AuditEvent, rules: ExecutionRules) -> ChainBreak | None:
    reason = rules.fault(event.kind, event.subject, event.actor, dict(event.data), event.at)
    return None if reason is None else ChainBreak(event.event_id, event.seq, reason)


def _outside_chain(conn: Connection, head_seq: int) -> ChainBreak | None:
    """A stored event past the head, or ``None``.

    An event linked after the head was read is linked to a newer head, which is read again
    here, so only a row beyond the current head counts. The head is read again after the
    events: a linker commits its events and its head together, and on PostgreSQL each statement
    sees what committed before it started, so a head read first could miss the newer head of
    events the next statement sees. An unlinked event is not a fault: it committed after
    :meth:`AuditLog.verify` linked (or it would have been linked), and the next linker run
    links it like any other.
    """
    highest = conn.execute(select(func.max(_A.c.seq)).where(_A.c.seq > head_seq)).scalar_one_or_none()
    if highest is None:
        return None
    current_head, _ = head(conn)
    if highest <= current_head:
        return None
    row = conn.execute(
        select(_A.c.event_id, _A.c.seq).where(_A.c.seq > current_head).order_by(_A.c.event_id).limit(1)
    ).one()
    return ChainBreak(row[0], row[1], "it is past the chain's head: it was inserted outside the audit log")


def _event(row: Mapping[str, Any]) -> AuditEvent:
    return AuditEvent(
        event_id=row["event_id"],
        at=row["at"],
        kind=row["kind"],
        subject=row["subject"],
        actor=row["actor"],
        data=json.loads(row["data_json"] or "{}"),
        seq=row.get("seq"),
        prev_hash=row.get("prev_hash"),
        hash=row.get("hash"),
    )
