"""Anchors: the audit chain's head at a moment, kept where the database's writers cannot reach, and their history.

An anchor is one line of canonical JSON, ``{"at": EPOCH_MS, "count": N, "hash": "...", "kind":
"audit.anchor", "seq": N, "time": "ISO 8601"}`` (:func:`anchor_line`; ``count``: the events in
the chain, positions 1 to ``seq``). ``[audit.anchor]`` (:mod:`mcp_approval.notify.anchors`)
appends one to a file, and sends the same line to a webhook and to notification channels, every
so often.

A file of anchors is a history, and :func:`check_anchors` checks all of it against the chain: the
positions (and counts) only grow from one line to the next, and each anchored event is still at
its position with its anchored hash. A deleted tail, a wiped chain, a tail rewritten with its
hashes recomputed, or a later anchor recording a head that went backwards: each is a finding
naming its line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_approval.clock import iso8601
from mcp_approval.errors import MCPApprovalError
from mcp_approval.storage.audit import AuditLog
from mcp_approval.storage.audit_chain import GENESIS_HASH

__all__ = [
    "ALERT_KIND",
    "ANCHOR_KIND",
    "Anchor",
    "AnchorFinding",
    "AnchorFormatError",
    "anchor_line",
    "check_anchors",
    "is_hash",
    "last_anchor",
    "parse_anchor",
    "read_anchors",
]

#: The ``kind`` member of every anchor.
ANCHOR_KIND = "audit.anchor"
#: The ``kind`` of the alert an anchor writer sends, instead of an anchor, when the chain does not hold the last one.
ALERT_KIND = "audit.anchor.alert"
#: How much of a file's end :func:`last_anchor` reads at a time, looking for its last line.
_TAIL_CHUNK = 4096


class AnchorFormatError(MCPApprovalError, ValueError):
    """A line that is not an anchor: a JSON object with ``seq`` (a position) and ``hash`` (64 hex digits)."""


@dataclass(frozen=True)
class Anchor:
    """One anchor: the chain's head as it was.

    Attributes:
        seq: the head's position (0: the empty chain).
        hash: the hash of the event at ``seq`` (:data:`~mcp_approval.storage.audit_chain.GENESIS_HASH` at 0).
        count: the events the chain held (``seq`` as written; ``None`` when the line has none).
        line: the line of its file it was read from (1 for an anchor given alone).
    """

    seq: int
    hash: str
    count: int | None = None
    line: int = 1


@dataclass(frozen=True)
class AnchorFinding:
    """Why one line of an anchor history does not hold against the chain.

    Attributes:
        line: the line of the anchor file (or of the messages saved into one).
        seq: the position it anchored, if it could be read.
        reason: what differs, in words.
    """

    line: int
    seq: int | None
    reason: str


def anchor_line(seq: int, digest: str, at_ms: int) -> str:
    """The anchor of head ``(seq, digest)`` written at ``at_ms``, as one line of canonical JSON (no newline)."""
    anchor: dict[str, Any] = {
        "kind": ANCHOR_KIND,
        "seq": seq,
        "hash": digest,
        "count": seq,
        "at": at_ms,
        "time": iso8601(at_ms),
    }
    return json.dumps(anchor, separators=(",", ":"), sort_keys=True)


def parse_anchor(text: str, line: int = 1) -> Anchor:
    """The anchor one line holds.

    Raises:
        AnchorFormatError: it is not a JSON object with ``seq`` and ``hash`` (and, if present, a
            whole ``count``), or it is an alert (``kind`` :data:`ALERT_KIND`), which anchors nothing.
    """
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, dict) and value.get("kind") == ALERT_KIND:
        raise AnchorFormatError(f"it is an alert, not an anchor: {value.get('reason', 'no reason given')}")
    seq = value.get("seq") if isinstance(value, dict) else None
    digest = value.get("hash") if isinstance(value, dict) else None
    count = value.get("count") if isinstance(value, dict) else None
    if type(seq) is not int or seq < 0 or not isinstance(digest, str) or not is_hash(digest):
        raise AnchorFormatError("it is not an anchor: a JSON object with seq (a position) and hash (64 hex digits)")
    if count is not None and (type(count) is not int or count < 0):
        raise AnchorFormatError("its count is not a number of events")
    return Anchor(seq, digest, count, line)


def is_hash(text: str) -> bool:
    """Whether ``text`` is a SHA-256 in lowercase hex."""
    return len(text) == 64 and not text.strip("0123456789abcdef")


def read_anchors(lines: Iterable[str]) -> tuple[list[Anchor], list[AnchorFinding]]:
    """The anchors of a history (blank lines skipped), and a finding for each line that is not one."""
    anchors: list[Anchor] = []
    unreadable: list[AnchorFinding] = []
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            anchors.append(parse_anchor(text, number))
        except AnchorFormatError as exc:
            unreadable.append(AnchorFinding(number, None, str(exc)))
    return anchors, unreadable


def last_anchor(path: Path) -> Anchor | None:
    """The anchor on the last line of ``path`` that holds anything; ``None`` when there is none (or no file).

    Reads the file from its end, so a long history costs no more than a short one.

    Raises:
        AnchorFormatError: the last line is not an anchor.
        OSError: the file exists but cannot be read.
    """
    try:
        file = path.open("rb")
    except FileNotFoundError:
        return None
    with file:
        end = file.seek(0, os.SEEK_END)
        tail = b""
        while end > 0:
            start = max(0, end - _TAIL_CHUNK)
            file.seek(start)
            tail = file.read(end - start) + tail
            end = start
            if tail.strip(b"\n").count(b"\n") >= 1:
                break
    lines = [line for line in tail.decode("utf-8", errors="replace").splitlines() if line.strip()]
    return parse_anchor(lines[-1]) if lines else None


async def check_anchors(log: AuditLog, anchors: Sequence[Anchor]) -> list[AnchorFinding]:
    """Every way ``anchors`` (a history, oldest first) does not hold against ``log``'s chain, in line order.

    Each anchor's position and count must be at least those of every line before it (a head
    never goes back), its count must be its position, and the event at its position must still
    be there with the anchored hash (a position past the head row's is reported as the chain
    ending before it). The chain's own links are :meth:`AuditLog.verify`'s to check.
    """
    stored = await log.hashes_at(anchor.seq for anchor in anchors if anchor.seq > 0)
    end, _ = await log.head()
    findings: list[AnchorFinding] = []
    highest: Anchor | None = None
    for anchor in anchors:
        findings.extend(_order_findings(anchor, highest))
        found = _event_finding(anchor, stored.get(anchor.seq), end)
        if found is not None:
            findings.append(found)
        if highest is None or anchor.seq > highest.seq:
            highest = anchor
    return findings


def _order_findings(anchor: Anchor, highest: Anchor | None) -> list[AnchorFinding]:
    findings: list[AnchorFinding] = []
    if anchor.count is not None and anchor.count != anchor.seq:
        reason = f"its count {anchor.count} is not its position {anchor.seq}: the line was edited"
        findings.append(AnchorFinding(anchor.line, anchor.seq, reason))
    if highest is None:
        return findings
    if anchor.seq < highest.seq:
        reason = (
            f"position {anchor.seq} is before position {highest.seq} of line {highest.line}: the anchors go "
            "backwards (a head anchored after the chain lost events, or lines moved)"
        )
        findings.append(AnchorFinding(anchor.line, anchor.seq, reason))
    elif anchor.count is not None and highest.count is not None and anchor.count < highest.count:
        reason = f"count {anchor.count} is below count {highest.count} of line {highest.line}: the anchors go backwards"
        findings.append(AnchorFinding(anchor.line, anchor.seq, reason))
    return findings


def _event_finding(anchor: Anchor, stored: tuple[int, str] | None, end: int) -> AnchorFinding | None:
    """Why the event ``anchor`` names is not in the chain as anchored (``stored``: its id and hash, if any)."""
    if anchor.seq == 0:
        if anchor.hash == GENESIS_HASH:
            return None
        return AnchorFinding(anchor.line, 0, "position 0 (the empty chain) does not have the empty chain's hash")
    if stored is None:
        if anchor.seq > end:
            reason = (
                f"the chain ends at {end}, before the anchored position {anchor.seq}: it was truncated, "
                "wiped or rewritten"
            )
        else:
            reason = f"no event is at the anchored position {anchor.seq} any more: it was deleted"
        return AnchorFinding(anchor.line, anchor.seq, reason)
    event_id, digest = stored
    if digest == anchor.hash:
        return None
    reason = (
        f"the event at position {anchor.seq} (event {event_id}) has hash {digest[:16]}..., not the anchored "
        f"{anchor.hash[:16]}...: the chain was rewritten at or before it"
    )
    return AnchorFinding(anchor.line, anchor.seq, reason)
