"""Where notifications go: signed webhooks (Standard Webhooks), Apprise (Slack, Teams, email, ...), the
interactive Slack channel (:mod:`mcp_approval.notify.slack`) and the Teams card (:mod:`mcp_approval.notify.teams`)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol

import httpx2
from standardwebhooks import Webhook

from mcp_approval.clock import Clock, SystemClock
from mcp_approval.notify.delivery_error import DeliveryError
from mcp_approval.notify.messages import Notification
from mcp_approval.notify.options import (
    AppriseChannelOptions,
    ChannelOptions,
    EmailChannelOptions,
    SlackChannelOptions,
    TeamsChannelOptions,
    WebhookChannelOptions,
)

if TYPE_CHECKING:
    import apprise

    from mcp_approval.notify.chat_messages import ChatMessages

__all__ = ["AppriseChannel", "Channel", "DeliveryError", "TextChannel", "WebhookChannel", "channel_from_options"]


class Channel(Protocol):
    """Sends one notification; raises :class:`DeliveryError` (or any error) when it was not accepted."""

    async def send(self, notification: Notification) -> None:
        """Deliver ``notification``."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


class TextChannel(Channel, Protocol):
    """A channel for people that can also send a text of its own (an audit anchor, an alert)."""

    async def send_text(self, title: str, text: str) -> None:
        """Send ``title`` and ``text`` as they are."""
        ...


class WebhookChannel:
    """POSTs each notification's JSON body with the Standard Webhooks headers.

    ``webhook-id`` is the notification's stable id (the same on every attempt), ``webhook-timestamp``
    the time of this attempt, ``webhook-signature`` the ``v1,`` HMAC-SHA256 of
    ``id.timestamp.body`` under the channel's secret. Any answer but 2xx is a failed attempt.
    """

    def __init__(self, options: WebhookChannelOptions, *, timeout_s: float, clock: Clock | None = None) -> None:
        self._url = options.url
        self._signer = Webhook(options.secret.get_secret_value())
        self._clock = clock or SystemClock()
        self._timeout_s = timeout_s
        self._http: httpx2.AsyncClient | None = None

    def headers(self, notification: Notification, body: str) -> dict[str, str]:
        """The signed headers of one attempt."""
        return self.signed_headers(notification.id, body)

    def signed_headers(self, message_id: str, body: str) -> dict[str, str]:
        """The signed headers of one attempt to deliver ``body`` as message ``message_id``."""
        moment = datetime.fromtimestamp(self._clock.now_ms() // 1000, tz=UTC)
        return {
            "content-type": "application/json",
            "webhook-id": message_id,
            "webhook-timestamp": str(int(moment.timestamp())),
            "webhook-signature": self._signer.sign(message_id, moment, body),
        }

    async def send(self, notification: Notification) -> None:
        """POST the notification; a non-2xx answer or a transport error is a :class:`DeliveryError`."""
        await self.post(notification.id, notification.body())

    async def post(self, message_id: str, body: str) -> None:
        """POST ``body`` (JSON) signed as message ``message_id``; a non-2xx answer is a :class:`DeliveryError`."""
        if self._http is None:  # opened on first use, so a server started again after aclose() still sends
            self._http = httpx2.AsyncClient(timeout=self._timeout_s, follow_redirects=False)
        try:
            response = await self._http.post(
                self._url, content=body.encode("utf-8"), headers=self.signed_headers(message_id, body)
            )
        except httpx2.HTTPError as exc:
            raise DeliveryError(f"webhook unreachable: {type(exc).__name__}") from None
        if not 200 <= response.status_code < 300:
            raise DeliveryError(f"webhook answered HTTP {response.status_code}")

    async def aclose(self) -> None:
        """Close the HTTP client."""
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()


class AppriseChannel:
    """Sends each notification to Apprise URLs (Slack, Microsoft Teams, email, ...), each in its own format.

    A service that renders HTML (email) gets :meth:`~Notification.html` (Apprise's email then
    carries it as ``text/html`` and the same lines as ``text/plain``); one that takes plain text
    (Slack: Apprise escapes ``&``, ``<``, ``>`` and turns Slack's markup off) gets
    :meth:`~Notification.text`; one that only takes Markdown (Teams workflows) gets
    :meth:`~Notification.markdown`. A URL's own ``format=`` choice is honoured. Every body is sent
    as exactly the format the service renders, so Apprise converts nothing.

    A channel with several URLs counts as delivered only when every service accepted; a retry sends
    to all of them again, so keep one URL per channel where duplicates matter.

    Raises:
        ValueError: Apprise does not understand one of the URLs (the URL is not repeated: it holds credentials).
    """

    def __init__(self, options: AppriseChannelOptions) -> None:
        import apprise  # imported only by deployments that use it

        self._targets: list[tuple[apprise.Apprise, apprise.NotifyFormat]] = []
        for index, url in enumerate(options.urls):
            target = apprise.Apprise()
            if not target.add(url.get_secret_value()):
                raise ValueError(f"urls[{index}]: not a URL Apprise supports (check its scheme and parameters)")
            self._targets.append((target, _rendered_format(target)))

    async def send(self, notification: Notification) -> None:
        """Notify every URL in its format; any refusal is a :class:`DeliveryError`."""
        accepted = [await asyncio.to_thread(_notify, target, fmt, notification) for target, fmt in self._targets]
        if not all(accepted):
            raise DeliveryError("a notification service did not accept the message (see the apprise log)")

    async def send_text(self, title: str, text: str) -> None:
        """Send ``text`` as it is (plain text, which Apprise escapes for services that render HTML)."""
        import apprise

        def notify(target: apprise.Apprise) -> bool:
            return bool(target.notify(body=text, title=title, body_format=apprise.NotifyFormat.TEXT))

        accepted = [await asyncio.to_thread(notify, target) for target, _ in self._targets]
        if not all(accepted):
            raise DeliveryError("a notification service did not accept the message (see the apprise log)")

    async def aclose(self) -> None:
        """Nothing to release."""


def _rendered_format(target: apprise.Apprise) -> apprise.NotifyFormat:
    """The format the one service behind ``target`` renders: HTML where it can, else plain text,
    else its own (its URL's ``format=`` first)."""
    import apprise

    (service,) = list(target)
    preferred = service.resolve_format(apprise.NotifyFormat.HTML)
    if preferred is apprise.NotifyFormat.HTML:
        return preferred
    return service.resolve_format(apprise.NotifyFormat.TEXT)


def _notify(target: apprise.Apprise, fmt: apprise.NotifyFormat, notification: Notification) -> bool:
    import apprise

    if fmt is apprise.NotifyFormat.HTML:
        body = notification.html()
    elif fmt is apprise.NotifyFormat.MARKDOWN:
        body = notification.markdown()
    else:
        body = notification.text()
    return bool(target.notify(body=body, title=notification.title(), body_format=fmt))


def channel_from_options(
    options: ChannelOptions, *, timeout_s: float, clock: Clock | None = None, messages: ChatMessages | None = None
) -> WebhookChannel | TextChannel:
    """The channel ``options`` describe; a Slack channel records its messages in ``messages``.

    Raises:
        ValueError: the channel cannot work (an Apprise URL it does not know, a Slack token file
            that cannot be read), naming the option.
    """
    if isinstance(options, WebhookChannelOptions):
        return WebhookChannel(options, timeout_s=timeout_s, clock=clock)
    if isinstance(options, TeamsChannelOptions):
        from mcp_approval.notify.teams import TeamsChannel  # imported only by deployments that use it

        return TeamsChannel(options, timeout_s=timeout_s)
    if isinstance(options, EmailChannelOptions):
        from mcp_approval.notify.email import EmailChannel  # texts only: the outbox builds the one with links

        return EmailChannel("", options, timeout_s=timeout_s, clock=clock)
    if isinstance(options, SlackChannelOptions):
        from mcp_approval.notify.slack import SlackChannel, slack_client  # Slack's SDK loads only here

        return SlackChannel(options, slack_client(options, timeout_s=timeout_s), messages, clock)
    return AppriseChannel(options)
