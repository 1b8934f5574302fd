"""``[audit.anchor]``: the audit chain's head written, every so often, where the database's writers cannot reach.

Whoever can write the database can delete the chain's tail (and move the head), wipe it, or
rewrite it with the hashes recomputed; the chain alone then still verifies. An anchor, the head
(position and hash) at a moment, kept elsewhere, catches all three: ``mcp-approval audit verify
--anchor FILE`` checks every anchor of the file against the chain
(:func:`~mcp_approval.storage.audit_anchors.check_anchors`).

Each anchor is one JSON object: ``{"kind": "audit.anchor", "seq": N, "hash": "...", "count": N,
"at": EPOCH_MS, "time": "ISO 8601"}`` (``count``: the events in the chain, positions 1 to ``seq``).
It is appended as a line to ``file``, POSTed to ``webhook``, signed as the Standard Webhooks
specification says (like a webhook notification channel), and sent to the named ``[notifications]``
``channels`` (an e-mail or chat message whose text is that line), every ``interval_s`` and when the
server stops::

    [audit.anchor]
    interval_s = 300
    file = "/var/lib/mcp-approval-anchors/audit-anchors.jsonl"   # relative: to the deployment file
    webhook = { url = "https://anchors.example.com/mcp-approval", secret = "whsec_..." }
    channels = ["auditors"]                                      # names in [notifications.channels]

A new anchor is never written over a chain that no longer holds the previous one. Before each
anchor the chain is walked from the previous anchor (the file's last line, which any process
sharing the file may have written, and the last one this process wrote) to its head
(:meth:`~mcp_approval.storage.AuditLog.verify_since`); if the walk fails, nothing is anchored and
an alert is raised instead: an ERROR log line, ``mcp_approval_audit_anchor_alerts_total{problem="chain"}``
(:attr:`AuditAnchors.alerts`), and a message (``kind`` ``audit.anchor.alert``) to the webhook and
the channels. A file that lost the anchors this process wrote there (emptied, replaced, its last
lines removed) or whose last line is not an anchor raises an alert too (``problem="history"``);
the chain is then walked from this process's own last anchor, and anchored if it holds. A
process that has no previous anchor (no file, or a new one, and nothing written since it
started) walks the whole chain first.

Processes sharing the file take turns on it (an exclusive ``flock`` for the whole write: read
back, walk, append, send), so its lines, and the webhook's and channels' messages, follow the
chain's order.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from types import MappingProxyType

from mcp_approval._background import pause_unless_stopping
from mcp_approval.clock import Clock, SystemClock, iso8601
from mcp_approval.notify.channels import TextChannel, WebhookChannel, channel_from_options
from mcp_approval.notify.options import AnchorOptions, ChannelOptions
from mcp_approval.storage.audit import AuditLog, ChainVerification
from mcp_approval.storage.audit_anchors import (
    ALERT_KIND,
    ANCHOR_KIND,
    Anchor,
    AnchorFormatError,
    anchor_line,
    last_anchor,
)

__all__ = ["ALERT_KIND", "ANCHOR_KIND", "AnchorOptions", "AuditAnchors", "anchor_line"]

_log = logging.getLogger(__name__)

_WEBHOOK_TIMEOUT_S = 10.0
#: How often a process waiting for another's turn on the anchor file looks again.
_LOCK_RETRY_S = 0.05
#: The problems an alert reports (the label of ``mcp_approval_audit_anchor_alerts_total``).
_PROBLEMS = ("chain", "history")


class AuditAnchors:
    """Writes the audit chain's head every ``interval_s`` while running, and once more at :meth:`stop`.

    Each write first walks the chain from the previous anchor; a chain that does not hold it gets
    no anchor, and an alert instead (see the module's description).

    Args:
        options: where and how often.
        audit: the audit log whose head is anchored.
        channels: the notification channels, by name (those ``options.channels`` names are used).
        clock: the time each anchor carries.

    Raises:
        ValueError: ``options.channels`` names a channel that is not in ``channels``.
    """

    def __init__(
        self,
        options: AnchorOptions,
        audit: AuditLog,
        *,
        channels: Mapping[str, ChannelOptions] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._options = options
        self._audit = audit
        self._clock = clock or SystemClock()
        self._webhook = (
            WebhookChannel(options.webhook, timeout_s=_WEBHOOK_TIMEOUT_S, clock=self._clock)
            if options.webhook is not None
            else None
        )
        self._channels = [_anchor_channel(name, channels or {}, self._clock) for name in options.channels]
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._turn = asyncio.Lock()
        self._last: Anchor | None = None
        self._alerts = dict.fromkeys(_PROBLEMS, 0)
        self._told: dict[str, object] = {}

    @property
    def alerts(self) -> Mapping[str, int]:
        """How many alerts this process raised, by problem: ``chain`` (no anchor written) and ``history``."""
        return MappingProxyType(self._alerts)

    async def start(self) -> None:
        """Write an anchor now, then one every ``interval_s``, in the background."""
        self._stopping.clear()
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        """Stop the background writes and write the head once more (the last anchor before shutdown).

        A write in progress is finished first, not cancelled: a destination never gets an anchor
        late, after a later one, or without the others.
        """
        task, self._task = self._task, None
        self._stopping.set()
        if task is not None:
            await task
        await self._write_logged()
        if self._webhook is not None:
            await self._webhook.aclose()
        for channel in self._channels:
            await channel.aclose()

    async def write(self) -> str | None:
        """Walk the chain from the previous anchor, then write its head to every destination.

        Returns the anchor written, or ``None`` when the chain did not hold the previous anchor:
        then nothing was written and an alert was raised.

        Raises:
            OSError: the file could not be read or appended to.
            DeliveryError: the webhook or a channel did not accept the anchor.
        """
        async with self._turn, _file_turn(self._options.file) as file:
            previous = await self._previous()
            walked = await self._audit.verify_since((anchor.seq, anchor.hash) for anchor in previous)
            if not walked.ok:
                await self._alert("chain", _chain_alert(walked, previous), key=tuple(previous))
                return None
            line = await self._send(walked.head_seq, walked.head_hash, file)
            self._last = Anchor(walked.head_seq, walked.head_hash, walked.head_seq)
            return line

    async def _send(self, seq: int, digest: str, file: int | None) -> str:
        at = self._clock.now_ms()
        line = anchor_line(seq, digest, at)
        message_id = f"audit-anchor-{seq}-{at}"
        if file is not None:
            await asyncio.to_thread(_append, file, line)
        if self._webhook is not None:
            await self._webhook.post(message_id, line)
        for channel in self._channels:
            if isinstance(channel, WebhookChannel):
                await channel.post(message_id, line)
            else:
                await channel.send_text(_ANCHOR_TITLE.format(seq=seq), line)
        return line

    async def _previous(self) -> list[Anchor]:
        """The anchors the chain must still hold: the file's last one and this process's last one."""
        known = [self._last] if self._last is not None else []
        path = self._options.file
        if path is None:
            return known
        try:
            in_file = await asyncio.to_thread(last_anchor, path)
        except AnchorFormatError as exc:
            await self._alert("history", f"the last line of {path} is not an anchor ({exc})", key=("format",))
            return known
        mine = self._last
        if in_file is None and mine is None:
            # A first start and a lost history look alike here: the whole chain is walked, and the
            # webhook's and channels' copies of earlier anchors are what show a lost history.
            _log.warning("audit anchors: %s holds no anchor; a new anchor history starts after walking the chain", path)
        elif in_file is None and mine is not None:
            problem = f"{path} holds no anchor, but this process anchored position {mine.seq} there: it was emptied"
            await self._alert("history", problem, key=("empty", mine))
        elif in_file is not None and mine is not None and in_file.seq < mine.seq:
            problem = (
                f"the last anchor in {path} is at position {in_file.seq}, before position {mine.seq} that this "
                "process anchored there: its last lines were removed"
            )
            await self._alert("history", problem, key=("shortened", in_file, mine))
        return [*known, in_file] if in_file is not None else known

    async def _alert(self, problem: str, text: str, *, key: object) -> None:
        """Log and count every alert; tell the webhook and the channels once per distinct one."""
        self._alerts[problem] += 1
        _log.error("audit anchor alert (%s): %s", problem, text)
        if self._told.get(problem) == key:
            return
        self._told[problem] = key
        at = self._clock.now_ms()
        body = json.dumps(
            {"kind": ALERT_KIND, "problem": problem, "reason": text, "at": at, "time": iso8601(at)},
            separators=(",", ":"),
            sort_keys=True,
        )
        message_id = f"audit-anchor-alert-{at}"
        for channel in [self._webhook, *self._channels]:
            try:
                if isinstance(channel, WebhookChannel):
                    await channel.post(message_id, body)
                elif channel is not None:
                    await channel.send_text(_ALERT_TITLE, f"{text}\n\n{body}")
            except Exception as exc:  # one receiver down must not keep the alert from the others
                _log.warning("audit anchor alert not delivered: %s: %s", type(exc).__name__, exc)

    async def _run(self) -> None:
        while not self._stopping.is_set():
            await self._write_logged()
            await pause_unless_stopping(self._stopping, self._options.interval_s)

    async def _write_logged(self) -> None:
        """:meth:`write`; a failure is logged and the next anchor tried at its time (a missed anchor is not fatal)."""
        try:
            await self.write()
        except Exception as exc:  # the store, the file or the receiver being down must not stop serving
            _log.warning("audit anchor not written: %s: %s", type(exc).__name__, exc)


#: The subject of an anchor sent to a channel (its text is the anchor line alone, for ``verify --anchor``).
_ANCHOR_TITLE = "mcp-approval audit anchor at position {seq}"
#: The subject of an alert sent to a channel.
_ALERT_TITLE = "mcp-approval audit anchor ALERT: the audit chain does not hold its last anchor"


def _chain_alert(walked: ChainVerification, previous: list[Anchor]) -> str:
    broken = walked.broken
    reason = broken.reason if broken is not None else "unknown"
    where = f" at position {broken.seq}" if broken is not None and broken.seq is not None else ""
    since = ", ".join(str(seq) for seq in sorted({anchor.seq for anchor in previous}))
    walked_from = f"from the previous anchor (position {since})" if since else "from its start (no previous anchor)"
    return (
        f"no anchor written: the chain walked {walked_from} is broken{where}: "
        f"{reason}; head {walked.head_seq} {walked.head_hash}"
    )


def _anchor_channel(name: str, channels: Mapping[str, ChannelOptions], clock: Clock) -> WebhookChannel | TextChannel:
    options = channels.get(name)
    if options is None:
        configured = ", ".join(sorted(channels)) or "none"
        raise ValueError(
            f"audit.anchor.channels: no channel {name!r} in [notifications.channels] (configured: {configured})"
        )
    return channel_from_options(options, timeout_s=_WEBHOOK_TIMEOUT_S, clock=clock)


@contextlib.asynccontextmanager
async def _file_turn(path: Path | None) -> AsyncIterator[int | None]:
    """The anchor file, opened for appending and held exclusively (``flock``) until the write is done.

    The lock is taken without blocking, and tried again while another process holds it, so a
    cancelled wait leaves no lock behind.
    """
    if path is None:
        yield None
        return
    fd = await asyncio.to_thread(os.open, path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                await asyncio.sleep(_LOCK_RETRY_S)
        yield fd
    finally:
        os.close(fd)  # releases the lock


def _append(fd: int, line: str) -> None:
    """One ``write`` of the whole line (so a process killed meanwhile leaves no half line), then to disk."""
    os.write(fd, (line + "\n").encode("utf-8"))
    os.fsync(fd)
