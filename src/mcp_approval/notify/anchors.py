"""``[audit.anchor]``: the audit chain's head written, every so often, where the database's writers cannot reach.

Whoever can write the database can delete the chain's tail (and move the head), wipe it, or
rewrite it with the hashes recomputed; the chain alone then still verifies. An anchor, the head
(position and hash) at a moment, kept elsewhere, catches all three: ``mcp-approval audit verify
--anchor FILE`` checks that the event at the anchored position still has the anchored hash.

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

Anchors only read the head row: they add nothing to the writes that extend the chain.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mcp_approval._background import pause_unless_stopping
from mcp_approval.clock import Clock, SystemClock, iso8601
from mcp_approval.notify.channels import AppriseChannel, WebhookChannel
from mcp_approval.notify.options import AnchorOptions, ChannelOptions, WebhookChannelOptions
from mcp_approval.storage.audit import AuditLog

__all__ = ["ANCHOR_KIND", "AnchorOptions", "AuditAnchors", "anchor_line"]

_log = logging.getLogger(__name__)

#: The ``kind`` member of every anchor.
ANCHOR_KIND = "audit.anchor"
_WEBHOOK_TIMEOUT_S = 10.0


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


class AuditAnchors:
    """Writes the audit chain's head every ``interval_s`` while running, and once more at :meth:`stop`.

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

    async def write(self) -> str:
        """Write the current head to every destination; returns the anchor written.

        Raises:
            OSError: the file could not be appended to.
            DeliveryError: the webhook or a channel did not accept it.
        """
        seq, digest = await self._audit.head()
        at = self._clock.now_ms()
        line = anchor_line(seq, digest, at)
        message_id = f"audit-anchor-{seq}-{at}"
        if self._options.file is not None:
            await asyncio.to_thread(_append, self._options.file, line)
        if self._webhook is not None:
            await self._webhook.post(message_id, line)
        for channel in self._channels:
            if isinstance(channel, WebhookChannel):
                await channel.post(message_id, line)
            else:
                await channel.send_text(_ANCHOR_TITLE.format(seq=seq), line)
        return line

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


def _anchor_channel(name: str, channels: Mapping[str, ChannelOptions], clock: Clock) -> WebhookChannel | AppriseChannel:
    options = channels.get(name)
    if options is None:
        configured = ", ".join(sorted(channels)) or "none"
        raise ValueError(
            f"audit.anchor.channels: no channel {name!r} in [notifications.channels] (configured: {configured})"
        )
    if isinstance(options, WebhookChannelOptions):
        return WebhookChannel(options, timeout_s=_WEBHOOK_TIMEOUT_S, clock=clock)
    return AppriseChannel(options)


def _append(path: Path, line: str) -> None:
    with path.open("a", encoding="utf-8") as file:
        file.write(line + "\n")
        file.flush()
