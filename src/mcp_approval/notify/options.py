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

    [notifications.channels.slack-approvals]
    kind = "slack"                                   # interactive: Approve / Deny buttons (a Slack app)
    bot_token_file = "slack-bot-token"
    signing_secret_file = "slack-signing-secret"
    channel = "C0APPROVALS"
    reviewers = { U0CAROL = "carol" }

    [notifications.channels.teams-card]
    kind = "teams"                                   # an Adaptive Card through a Teams workflow
    url = "https://prod-00.westus.logic.azure.com:443/workflows/abc/triggers/manual/paths/invoke?sig=..."

    [notifications.channels.approvers-mail]
    kind = "email"                                   # each reviewer's own Approve / Deny links (SMTP)
    smtp_host = "smtp.example.com"
    sender = "approvals@example.com"
    reviewers = { carol = "carol@example.com" }

    [templates.treasury]
    notify = ["ops-hook", "treasury-team", "slack-approvals", "teams-card", "approvers-mail"]

Secrets (a webhook's signing secret, Apprise URLs, which hold tokens and passwords) are
``SecretStr``: never logged or shown, and never part of a message.
"""

from __future__ import annotations

import base64
import binascii
from pathlib import Path
from typing import Annotated, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from mcp_approval.notify.email_options import EmailChannelOptions

__all__ = [
    "SLACK_API_URL",
    "AnchorOptions",
    "AppriseChannelOptions",
    "ChannelOptions",
    "EmailChannelOptions",
    "NotificationOptions",
    "SlackChannelOptions",
    "TeamsChannelOptions",
    "WebhookChannelOptions",
]

_SECRET_PREFIX = "whsec_"  # noqa: S105 (the prefix of every signing secret, not one)
#: Slack's Web API, where a Slack channel's calls go unless ``api_url`` says otherwise.
SLACK_API_URL = "https://slack.com/api/"


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


class SlackChannelOptions(_Options):
    """``kind = "slack"``: each request as a Slack message with Approve / Deny buttons (a Slack app of your own).

    The message is posted with ``chat.postMessage`` and rewritten with ``chat.update`` as decisions
    come and at the end. Slack sends each button click to ``<base_url>/channels/<channel
    name>/interactions`` (the app's interactivity Request URL), signed with the app's signing
    secret; the clicking Slack user decides as the reviewer it maps to, by the same rules as the
    console. Files are read when the server starts (relative paths: to the deployment file).
    """

    kind: Literal["slack"] = "slack"
    #: A file holding the app's bot token (``xoxb-...``; scopes ``chat:write``, and ``users:read``
    #: with ``users:read.email`` for ``match_email``).
    bot_token_file: Path
    #: A file holding the app's signing secret (Basic Information > App Credentials); every
    #: interaction is verified with it, and none is accepted without it.
    signing_secret_file: Path
    #: The conversation requests are posted to (its id, ``C...``; the bot must be a member).
    channel: str = Field(min_length=1, max_length=100)
    #: Slack's Web API base URL (a test or a proxy may point it elsewhere).
    api_url: str = SLACK_API_URL
    #: Slack user id -> reviewer id. Only these users decide (unless ``match_email``).
    reviewers: dict[str, str] = Field(default_factory=dict)
    #: A Slack user not in ``reviewers`` decides as the reviewer whose id is their confirmed e-mail
    #: address (read with ``users.info``; guests, bots and deactivated accounts never match).
    match_email: bool = False

    @field_validator("api_url")
    @classmethod
    def _api_url(cls, url: str) -> str:
        if not url.startswith(("https://", "http://")):
            raise ValueError(f"must be an http:// or https:// URL, not {url!r}")
        return url if url.endswith("/") else url + "/"

    @field_validator("reviewers")
    @classmethod
    def _reviewer_ids(cls, reviewers: dict[str, str]) -> dict[str, str]:
        for user, reviewer in reviewers.items():
            if not user or not reviewer:
                raise ValueError(
                    f"a Slack user id and its reviewer id must both be non-empty, not {user!r} = {reviewer!r}"
                )
        return reviewers


class TeamsChannelOptions(_Options):
    """``kind = "teams"``: each request as an Adaptive Card posted to a Microsoft Teams workflow.

    The card carries the request's facts and a button that opens its page in the console, where
    the reviewer signs in and decides (Teams itself decides nothing).
    """

    kind: Literal["teams"] = "teams"
    #: The workflow's HTTP trigger URL ("When a Teams webhook request is received"); its ``sig``
    #: parameter is a credential, so the URL is a secret.
    url: SecretStr

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: SecretStr) -> SecretStr:
        if not url.get_secret_value().startswith(("https://", "http://")):
            raise ValueError("must be an http:// or https:// URL (the workflow's HTTP trigger)")
        return url


#: One channel, by its ``kind``.
ChannelOptions = Annotated[
    WebhookChannelOptions | AppriseChannelOptions | SlackChannelOptions | TeamsChannelOptions | EmailChannelOptions,
    Field(discriminator="kind"),
]


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
