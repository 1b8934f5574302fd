"""Delivering notifications from the audit chain, at least once, in order, off the MCP path.

Each channel has a delivery cursor over the audit chain
(:class:`~mcp_approval.storage.DeliveryCursors`). A background task of every serving process
looks every ``poll_interval_s``: for each channel whose cursor it can lease, it walks the events
after the cursor, sends each one the channel is for (a notified kind, about a request of a
template whose ``notify`` names the channel) and advances the cursor after each send. A failed
send stops the walk, counts an attempt and schedules the next one with exponential backoff; the
events behind it wait, so a receiver that is down gets every event, in chain order, once it is
up again. A process killed between a send and the advance sends that event again after its
restart (or another worker does, once the lease expires), with the same ``webhook-id``.

A Slack channel also takes answers: its buttons' clicks arrive at :meth:`NotificationOutbox.routes`
(``/channels/<name>/interactions``), and its messages' addresses live in the ``notify`` tables
(:attr:`NotificationOutbox.migrations`). So do an e-mail channel's links, whose pages
(``/console/email/...``, :mod:`~mcp_approval.notify.email_pages`) are mounted with the console.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from mcp_approval._background import finish_or_cancel, pause_unless_stopping
from mcp_approval.backends import ApprovalBackend, SupportsReview, SupportsTemplates
from mcp_approval.clock import Clock, SystemClock
from mcp_approval.crashpoints import crash_point
from mcp_approval.notify.channels import Channel, channel_from_options
from mcp_approval.notify.chat_messages import NOTIFY_MIGRATIONS, ChatMessages
from mcp_approval.notify.email_links import EmailLinks
from mcp_approval.notify.messages import MessageBuilder, Notification
from mcp_approval.notify.options import (
    ChannelOptions,
    EmailChannelOptions,
    NotificationOptions,
    SlackChannelOptions,
    TeamsChannelOptions,
)
from mcp_approval.notify.reminders import REMINDER_MIGRATIONS, Reminders
from mcp_approval.storage import AuditLog, Database, DeliveryCursors, Migrations

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import BaseRoute

__all__ = ["CONSUMER_PREFIX", "Interactions", "NotificationOutbox", "notification_outbox"]

_log = logging.getLogger(__name__)
#: A channel's cursor is named ``notify:<channel>``.
CONSUMER_PREFIX = "notify:"
#: Events sent per lease before the cursor's lease is looked at again.
_BATCH = 200


class Interactions(Protocol):
    """Where a channel's people answer: the HTTP requests of one channel's buttons (Slack's interactions)."""

    async def handle(self, request: Request) -> Response:
        """Answer one request."""
        ...

    async def aclose(self) -> None:
        """Finish or cancel the work the answers started."""
        ...


class NotificationOutbox:
    """Delivers the audit chain's approval events to the configured channels.

    Args:
        database: the store of the audit log and the cursors.
        audit: the audit log.
        channels: the channels, by name.
        routes: for each channel, the templates whose requests it is told about (``""`` for the
            default template).
        messages: makes a notification of an event.
        options: the schedule (poll interval, backoff, lease).
        clock: the source of time.
        interactions: the channels that take answers, by name (Slack's).
        reminders: claims the reminders and escalations that are due, each round, and records
            their deliveries (``None``: no template reminds or escalates).
    """

    def __init__(
        self,
        database: Database,
        audit: AuditLog,
        channels: Mapping[str, Channel],
        routes: Mapping[str, frozenset[str]],
        messages: MessageBuilder,
        options: NotificationOptions,
        clock: Clock | None = None,
        interactions: Mapping[str, Interactions] | None = None,
        reminders: Reminders | None = None,
    ) -> None:
        self._reminders = reminders
        self._audit = audit
        self._interactions = dict(interactions or {})
        self._channels = dict(channels)
        self._routes = dict(routes)
        self._messages = messages
        self._options = options
        self._cursors = DeliveryCursors(
            database, owner=secrets.token_hex(8), lease_ms=int(options.lease_s * 1000), clock=clock or SystemClock()
        )
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        #: The links of the e-mail channels (``None`` without one); their pages need it.
        self.email_links: EmailLinks | None = None

    @property
    def migrations(self) -> tuple[Migrations, ...]:
        """The table histories the channels need (``notify``: where a Slack channel's messages are, e-mail
        links; ``reminders``: the reminders and escalations claimed and delivered)."""
        histories = (NOTIFY_MIGRATIONS,) if self._interactions or self.email_links is not None else ()
        return histories + ((REMINDER_MIGRATIONS,) if self._reminders is not None else ())

    def routes(self) -> list[BaseRoute]:
        """``POST /channels/{name}/interactions`` for the channels that take answers (none: no route)."""
        if not self._interactions:
            return []
        from mcp_approval.notify.slack_interactions import interactions_route  # Bolt loads only with Slack channels

        return [interactions_route(self._interactions)]

    def openapi_paths(self) -> list[dict[str, Any]]:
        """The OpenAPI path items of :meth:`routes`."""
        if not self._interactions:
            return []
        from mcp_approval.notify.slack_interactions import interaction_paths

        return [interaction_paths()]

    async def start(self) -> None:
        """Create missing cursors (at the chain's head) and start delivering in the background."""
        for name in self._channels:
            await self._cursors.ensure(CONSUMER_PREFIX + name)
        self._stopping.clear()
        self._task = asyncio.create_task(self._run(), name="notification-outbox")

    async def stop(self) -> None:
        """Stop delivering and close the channels.

        The send in flight gets a grace to finish and move its cursor (see
        :mod:`mcp_approval._background`); one still running then is cancelled, and its event is
        sent again by the next worker to lease the cursor.
        """
        self._stopping.set()
        task, self._task = self._task, None
        await finish_or_cancel([task])
        for interactions in self._interactions.values():
            await interactions.aclose()
        for name, channel in self._channels.items():
            with contextlib.suppress(Exception):
                await self._cursors.release(CONSUMER_PREFIX + name)
            await channel.aclose()

    async def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                await self.deliver_due()
            except Exception:  # a store outage must not end the loop; the next round tries again
                _log.exception("notification delivery round failed")
            await pause_unless_stopping(self._stopping, self._options.poll_interval_s)

    async def deliver_due(self) -> None:
        """One round: the reminders and escalations now due are claimed, then every channel that is
        due and not leased elsewhere gets what it is owed."""
        if self._reminders is not None:
            try:
                await self._reminders.claim_due()
            except Exception:  # a failed claim is retried next round; the channels still deliver
                _log.exception("claiming the reminders that are due failed")
        for name in self._channels:
            await self._drain(name)

    async def _drain(self, name: str) -> None:
        consumer = CONSUMER_PREFIX + name
        after = await self._cursors.claim(consumer)
        if after is None:
            return
        try:
            await self._walk(name, consumer, after)
        finally:
            await self._cursors.release(consumer)

    async def _walk(self, name: str, consumer: str, after: int) -> None:
        channel, templates = self._channels[name], self._routes.get(name, frozenset())
        seen, sent = after, 0
        async for event in self._audit.export(after_seq=after):
            if self._stopping.is_set():
                return  # the cursor stands after the last event sent
            notification = await self._messages.build(event)
            if notification is not None and _for_channel(notification, name, templates):
                try:
                    await channel.send(notification)
                except Exception as exc:  # every failure is retried, whatever its kind
                    await self._failed(name, consumer, seen, exc)
                    return
                crash_point("after_notification_sent")  # sent, the cursor not yet moved
                await self._told(notification, name)
                seen, sent = event.seq or seen, sent + 1
                if not await self._cursors.advance(consumer, seen, delivered=1):
                    return  # the lease went to another worker
                if sent >= _BATCH:
                    return
            else:
                seen = event.seq or seen
        if seen > after:
            await self._cursors.advance(consumer, seen, delivered=0)

    async def _told(self, notification: Notification, name: str) -> None:
        """Record a reminder's or an escalation's delivery on channel ``name`` (who was told, when, where)."""
        if self._reminders is None or notification.channels is None:
            return
        step, role = str(notification.data.get("step")), str(notification.data.get("told"))
        await self._reminders.delivered(notification.request_id, step, role, name)

    async def _failed(self, name: str, consumer: str, seen: int, exc: Exception) -> None:
        await self._cursors.advance(consumer, seen, delivered=0)  # events skipped before the failed one
        cursor = await self._cursors.get(consumer)
        attempts = (cursor.attempts if cursor is not None else 0) + 1
        delay = self._options.retry_delay_ms(attempts)
        _log.warning("notification channel %r: attempt %d failed (%s); retrying in %d ms", name, attempts, exc, delay)
        await self._cursors.failed(consumer, f"{type(exc).__name__}: {exc}", retry_in_ms=delay)


def _for_channel(notification: Notification, name: str, templates: frozenset[str]) -> bool:
    """Whether channel ``name`` (told about ``templates``' requests) sends ``notification``: a
    reminder or an escalation only to the channels its event names, anything else by template."""
    named = notification.channels
    if named is not None:
        return name in named
    return (notification.template or "") in templates


def notification_outbox(
    options: NotificationOptions,
    backend: ApprovalBackend,
    database: Database,
    audit: AuditLog,
    *,
    clock: Clock | None = None,
) -> NotificationOutbox | None:
    """The outbox of ``options``'s channels for ``backend``'s requests, or ``None`` without channels.

    Raises:
        ValueError: channels for a backend whose requests and templates are not kept here (one
            that is not :class:`~mcp_approval.backends.capabilities.SupportsReview` and
            :class:`~mcp_approval.backends.capabilities.SupportsTemplates`, such as ARAP's), or a
            channel that cannot work (naming ``notifications.channels.NAME``).
    """
    if not options.channels:
        return None
    if not (isinstance(backend, SupportsReview) and isinstance(backend, SupportsTemplates)):
        raise ValueError(
            "notifications.channels: notifications tell about the local approval backend's requests; "
            f"the {backend.name!r} backend's requests are not kept here (its own service notifies reviewers)"
        )
    channels: dict[str, Channel] = {}
    interactions: dict[str, Interactions] = {}
    links = EmailLinks(database, audit)
    for name, channel in options.channels.items():
        try:
            _needs_a_link(channel, options.console_url)
            if isinstance(channel, EmailChannelOptions):
                channels[name] = _email_channel(name, channel, options, backend, links, clock)
                continue
            channels[name] = channel_from_options(
                channel, timeout_s=options.timeout_s, clock=clock, messages=ChatMessages(database, name)
            )
            if isinstance(channel, SlackChannelOptions):
                interactions[name] = _slack_interactions(name, channel, channels[name], backend, database, clock)
        except ValueError as exc:
            raise ValueError(f"notifications.channels.{name}.{exc}") from None
    routes = {
        name: frozenset(template for template, rules in backend.templates.items() if name in rules.notify)
        for name in channels
    }
    messages = MessageBuilder(backend, database, audit, options.console_url)
    reminders = Reminders(database, audit, backend.templates, clock)
    outbox = NotificationOutbox(
        database,
        audit,
        channels,
        routes,
        messages,
        options,
        clock,
        interactions,
        reminders if reminders.plans else None,
    )
    if any(isinstance(channel, EmailChannelOptions) for channel in options.channels.values()):
        outbox.email_links = links
    return outbox


def _needs_a_link(channel: ChannelOptions, console_url: str | None) -> None:
    """A Teams card's one button, and an e-mail's links, open the console: they need the console's URL."""
    if isinstance(channel, TeamsChannelOptions) and not console_url:
        raise ValueError("kind: a Teams card links the request's console page; set notifications.console_url")
    if isinstance(channel, EmailChannelOptions) and not console_url:
        raise ValueError("kind: an e-mail's decision links open the console; set notifications.console_url")


def _email_channel(
    name: str,
    options: EmailChannelOptions,
    notifications: NotificationOptions,
    backend: SupportsReview,
    links: EmailLinks,
    clock: Clock | None,
) -> Channel:
    """The e-mail channel ``name``, writing each reviewer's links to ``links``."""
    from mcp_approval.notify.email import EmailChannel

    return EmailChannel(
        name,
        options,
        timeout_s=notifications.timeout_s,
        backend=backend,
        links=links,
        base_url=notifications.console_url,
        clock=clock,
    )


def _slack_interactions(
    name: str,
    options: SlackChannelOptions,
    channel: Channel,
    backend: SupportsReview,
    database: Database,
    clock: Clock | None,
) -> Interactions:
    """The interactions route's handler of the Slack channel ``name`` (sharing ``channel``'s Web API client)."""
    from mcp_approval.notify.slack import SlackChannel, read_secret_file
    from mcp_approval.notify.slack_deciding import SlackDecider
    from mcp_approval.notify.slack_interactions import SlackInteractions
    from mcp_approval.storage import SqlOnceGuard

    assert isinstance(channel, SlackChannel)
    secret = read_secret_file(options.signing_secret_file, setting="signing_secret_file")
    decider = SlackDecider(
        backend, ChatMessages(database, name), channel.client, options.reviewers, match_email=options.match_email
    )
    # A replayed click is refused by every worker on the store.
    return SlackInteractions(name, secret, channel.client, decider, SqlOnceGuard(database), clock)
