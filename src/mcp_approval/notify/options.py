"""``[notifications]``: the channels that tell reviewers and systems what happens to approval requests.

A channel is named once under ``[notifications.channels.NAME]`` and chosen per template with
``[templates.T] notify = ["NAME", ...]``::

    [notifications]
    console_url = "https://approvals.example.com"   # links point at <console_url>/console/requests/<id>

    [notifications.channels.ops-hook]
    kind = "webhook"                                 # Standard Webhooks, signed
    url = "https://hooks.example.com/approvals"
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

    [notifications.channels.treasury-team]
    kind = "apprise"                                 # Slack, Teams, email, ... (Apprise URLs)
    urls = ["slack://T000/B000/XXXX/#approvals"]

    [templates.treasury]
    notify = ["ops-hook", "treasury-team"]

Secrets (a webhook's signing secret, Apprise URLs, which hold tokens and passwords) are
``SecretStr``: never logged or shown, and never part of a message.
"""

from __future__ import annotations

import base64
import binascii
from pathlib import Path
from typing import Annotated, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

__all__ = ["AnchorOptions", "AppriseChannelOptions", "ChannelOptions", "NotificationOptions", "WebhookChannelOptions"]

_SECRET_PREFIX = "whsec_"  # noqa: S105 (the prefix of every signing secret, not one)


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WebhookChannelOptions(_Options):
    """``kind = "webhook"``: a JSON POST per event, signed as the Standard Webhooks specification says."""

    #: Always ``"webhook"`` (among notification channels, it picks this kind).
    kind: Literal["webhook"] = "webhook"
    #: Where events are POSTed (``https://`` in production).
    url: str
    #: The signing secret shared with the receiver: ``whsec_`` and base64 of 24 to 64 random bytes.
    secret: SecretStr

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        if not url.startswith(("https://", "http://")):
            raise ValueError(f"must be an http:// or https:// URL, not {url!r}")
        return url

    @field_validator("secret")
    @classmethod
    def _signing_secret(cls, secret: SecretStr) -> SecretStr:
        value = secret.get_secret_value().removeprefix(_SECRET_PREFIX)
        try:
            key = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("must be 'whsec_' followed by base64 (a Standard Webhooks signing secret)") from None
        if not 24 <= len(key) <= 64:
            raise ValueError(f"must hold 24 to 64 random bytes, not {len(key)}")
        return secret


class AppriseChannelOptions(_Options):
    """``kind = "apprise"``: a message for people through Apprise (Slack, Microsoft Teams, email, ...)."""

    kind: Literal["apprise"] = "apprise"
    #: Apprise URLs: ``slack://...``, ``msteams://...``, ``mailto://...`` (each holds its own credentials).
    urls: list[SecretStr] = Field(min_length=1)


#: One channel, by its ``kind``.
ChannelOptions = Annotated[WebhookChannelOptions | AppriseChannelOptions, Field(discriminator="kind")]


class NotificationOptions(_Options):
    """``[notifications]``: the channels, and how their deliveries are retried."""

    #: Channels by name; templates choose them with ``notify``.
    channels: dict[str, ChannelOptions] = Field(default_factory=dict)
    #: The console's public base URL for links in messages (``serve``: ``[server] base_url``).
    console_url: str | None = None
    #: How often a worker looks for events to deliver.
    poll_interval_s: float = Field(default=1.0, gt=0)
    #: The wait after a channel's first failed attempt; it doubles with each further failure.
    retry_initial_s: float = Field(default=1.0, gt=0)
    #: The longest wait between attempts (a channel is retried until it accepts; nothing is dropped).
    retry_max_s: float = Field(default=300.0, gt=0)
    #: How long one worker delivers for a channel before another may take over (after a crash).
    lease_s: float = Field(default=30.0, gt=0)
    #: How long one delivery may take.
    timeout_s: float = Field(default=10.0, gt=0)

    @field_validator("channels")
    @classmethod
    def _names(cls, channels: dict[str, ChannelOptions]) -> dict[str, ChannelOptions]:
        for name in channels:
            if not name or len(name) > 100:
                raise ValueError(f"a channel name must have 1 to 100 characters, not {name!r}")
        return channels

    @model_validator(mode="after")
    def _lease_outlasts_a_delivery(self) -> NotificationOptions:
        if self.lease_s <= self.timeout_s:
            raise ValueError(
                f"notifications.lease_s ({self.lease_s}) must exceed timeout_s ({self.timeout_s}): "
                "a delivery still running when its lease ends would be sent twice"
            )
        return self

    def retry_delay_ms(self, attempts: int) -> int:
        """The wait before the attempt after ``attempts`` failed ones (exponential, capped)."""
        delay = self.retry_initial_s * 2 ** max(0, min(attempts - 1, 30))
        return int(min(delay, self.retry_max_s) * 1000)


class AnchorOptions(BaseModel):
    """Where and how often the audit chain's head is written (at least one of ``file``, ``webhook``, ``channels``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: Seconds between two anchors (one more is written when the server stops).
    interval_s: float = Field(default=300.0, gt=0)
    #: A file each anchor is appended to as a JSON line (keep it off the database's host, or ship it away).
    file: Path | None = None
    #: A receiver each anchor is POSTed to, signed with its Standard Webhooks secret.
    webhook: WebhookChannelOptions | None = None
    #: Notification channels (names in ``[notifications.channels]``) each anchor is sent to as a message.
    channels: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _somewhere(self) -> Self:
        if self.file is None and self.webhook is None and not self.channels:
            raise ValueError("an anchor needs a file, a webhook or a notification channel")
        return self
