"""``kind = "slack"``: one Slack message per request, posted once and rewritten as the request moves on.

The first event about a request posts its message (``chat.postMessage``) and records where it is
(:class:`~mcp_approval.notify.chat_messages.ChatMessages`); every later event rewrites that
message (``chat.update``) with the progress, then the outcome, and without the buttons once the
request takes no more decisions. A message someone deleted is posted again. Clicks on its buttons
arrive at :class:`~mcp_approval.notify.slack_interactions.SlackInteractions`.

Slack's Python SDK (``slack_sdk``, with ``aiohttp`` for its asynchronous client) does the calls;
``api_url`` points it at Slack's Web API or at a stand-in.
"""

from __future__ import annotations

from pathlib import Path

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from mcp_approval.clock import Clock, SystemClock
from mcp_approval.keyring import warn_if_readable_by_others
from mcp_approval.notify.chat_messages import ChatMessage, ChatMessages
from mcp_approval.notify.delivery_error import DeliveryError
from mcp_approval.notify.messages import Notification
from mcp_approval.notify.options import SlackChannelOptions
from mcp_approval.notify.slack_blocks import escaped, request_message

__all__ = ["SlackChannel", "read_secret_file", "slack_client"]

#: ``chat.update`` errors meaning the message is gone (deleted, or its conversation archived): post anew.
_GONE = frozenset({"message_not_found", "cant_update_message"})


def read_secret_file(path: Path, *, setting: str) -> str:
    """The secret in ``path`` (surrounding whitespace removed); a readable-by-others file is warned about.

    Raises:
        ValueError: the file cannot be read or is empty (the message names ``setting`` and the path, never the content).
    """
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{setting}: cannot read {path} ({type(exc).__name__})") from None
    if not text:
        raise ValueError(f"{setting}: {path} is empty")
    warn_if_readable_by_others(path, setting=setting)
    return text


def slack_client(options: SlackChannelOptions, *, timeout_s: float) -> AsyncWebClient:
    """A Web API client with the channel's bot token, calling ``options.api_url``.

    Raises:
        ValueError: the token file cannot be read or is empty.
    """
    token = read_secret_file(options.bot_token_file, setting="bot_token_file")
    return AsyncWebClient(token=token, base_url=options.api_url, timeout=max(1, round(timeout_s)))


class SlackChannel:
    """Posts and rewrites each request's message in the configured conversation.

    Args:
        options: the channel's options.
        client: the Web API client (:func:`slack_client`).
        messages: where each request's message is recorded (``None``: nothing is recorded, as
            for audit anchors, which only :meth:`send_text`).
        clock: the time recorded with each message.
    """

    def __init__(
        self,
        options: SlackChannelOptions,
        client: AsyncWebClient,
        messages: ChatMessages | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._conversation = options.channel
        self._client = client
        self._messages = messages
        self._clock = clock or SystemClock()

    @property
    def client(self) -> AsyncWebClient:
        """The Web API client (the channel's interactions answer through it too)."""
        return self._client

    async def send(self, notification: Notification) -> None:
        """Post the request's message, or rewrite the one posted before; Slack's refusal is a :class:`DeliveryError`."""
        text, blocks = request_message(notification)
        posted = await self._messages.find(notification.request_id) if self._messages is not None else None
        try:
            if posted is not None and await self._rewritten(posted, text, blocks):
                if notification.channels is not None:
                    # A reminder or an escalation: a rewritten message pings nobody, a reply in its thread does.
                    await self._client.chat_postMessage(
                        channel=posted.conversation,
                        thread_ts=posted.message,
                        reply_broadcast=True,
                        text=escaped(notification.text()),
                        mrkdwn=False,
                        unfurl_links=False,
                    )
                return
            answer = await self._client.chat_postMessage(
                channel=self._conversation,
                text=text,
                blocks=blocks,
                mrkdwn=False,
                unfurl_links=False,
                unfurl_media=False,
            )
        except SlackApiError as exc:
            raise DeliveryError(f"Slack refused the message: {_error_of(exc)}") from None
        if self._messages is not None:
            where = ChatMessage(str(answer["channel"]), str(answer["ts"]))
            await self._messages.remember(
                notification.request_id, where, self._clock.now_ms(), replace=posted is not None
            )

    async def _rewritten(self, posted: ChatMessage, text: str, blocks: list[dict[str, object]]) -> bool:
        """Rewrite ``posted``; ``False`` when it is gone (the caller posts a new one)."""
        try:
            await self._client.chat_update(channel=posted.conversation, ts=posted.message, text=text, blocks=blocks)
        except SlackApiError as exc:
            if _error_of(exc) in _GONE:
                return False
            raise
        return True

    async def send_text(self, title: str, text: str) -> None:
        """Post ``title`` and ``text`` as a plain message (an audit anchor, an alert)."""
        try:
            await self._client.chat_postMessage(
                channel=self._conversation, text=escaped(f"{title}\n{text}"), mrkdwn=False, unfurl_links=False
            )
        except SlackApiError as exc:
            raise DeliveryError(f"Slack refused the message: {_error_of(exc)}") from None

    async def aclose(self) -> None:
        """Nothing to release (the client opens a session per call)."""


def _error_of(exc: SlackApiError) -> str:
    """Slack's error code (``channel_not_found``, ``invalid_auth``, ...), never the request."""
    response = exc.response
    error = response.get("error") if response is not None else None
    return str(error) if error else f"HTTP {getattr(response, 'status_code', '?')}"
