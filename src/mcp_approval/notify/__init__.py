"""Notifications: approval events told to webhooks and people, from the audit chain as an outbox.

Configured as ``[notifications]`` (:class:`NotificationOptions`) and chosen per template with
``notify``; delivered by :class:`NotificationOutbox` in the background of every serving process.
Kinds: ``webhook``, ``apprise``, ``slack`` (:mod:`~mcp_approval.notify.slack`: a message with
Approve / Deny buttons, whose clicks :mod:`~mcp_approval.notify.slack_interactions` verifies and
decides), ``teams`` (:mod:`~mcp_approval.notify.teams`: an Adaptive Card linking the console) and
``email`` (:mod:`~mcp_approval.notify.email`: each reviewer's own message, whose Approve / Deny
links open a confirmation page, :mod:`~mcp_approval.notify.email_pages`).
A template's ``remind_after_s`` and ``escalate_after_s`` tell a pending request's reviewers again,
then another role (:class:`Reminders`, :mod:`~mcp_approval.notify.reminders`).
"""

from typing import TYPE_CHECKING

from mcp_approval._lazy import lazy_getattr

if TYPE_CHECKING:
    from mcp_approval.notify.channels import (
        AppriseChannel,
        Channel,
        DeliveryError,
        WebhookChannel,
        channel_from_options,
    )
    from mcp_approval.notify.messages import EVENT_TYPES, MessageBuilder, Notification
    from mcp_approval.notify.options import (
        AppriseChannelOptions,
        ChannelOptions,
        EmailChannelOptions,
        NotificationOptions,
        SlackChannelOptions,
        TeamsChannelOptions,
        WebhookChannelOptions,
    )
    from mcp_approval.notify.outbox import CONSUMER_PREFIX, NotificationOutbox, notification_outbox
    from mcp_approval.notify.reminders import REMINDER_MIGRATIONS, Reminders

# Name -> the module that defines it, imported on first access (the options load no HTTP client).
_LAZY = {
    "AppriseChannel": "mcp_approval.notify.channels",
    "AppriseChannelOptions": "mcp_approval.notify.options",
    "CONSUMER_PREFIX": "mcp_approval.notify.outbox",
    "Channel": "mcp_approval.notify.channels",
    "ChannelOptions": "mcp_approval.notify.options",
    "DeliveryError": "mcp_approval.notify.channels",
    "EmailChannelOptions": "mcp_approval.notify.email_options",
    "EVENT_TYPES": "mcp_approval.notify.messages",
    "MessageBuilder": "mcp_approval.notify.messages",
    "Notification": "mcp_approval.notify.messages",
    "NotificationOptions": "mcp_approval.notify.options",
    "NotificationOutbox": "mcp_approval.notify.outbox",
    "REMINDER_MIGRATIONS": "mcp_approval.notify.reminders",
    "Reminders": "mcp_approval.notify.reminders",
    "SlackChannelOptions": "mcp_approval.notify.options",
    "TeamsChannelOptions": "mcp_approval.notify.options",
    "WebhookChannel": "mcp_approval.notify.channels",
    "WebhookChannelOptions": "mcp_approval.notify.options",
    "channel_from_options": "mcp_approval.notify.channels",
    "notification_outbox": "mcp_approval.notify.outbox",
}

__all__ = [
    "CONSUMER_PREFIX",
    "EVENT_TYPES",
    "REMINDER_MIGRATIONS",
    "AppriseChannel",
    "AppriseChannelOptions",
    "Channel",
    "ChannelOptions",
    "DeliveryError",
    "EmailChannelOptions",
    "MessageBuilder",
    "Notification",
    "NotificationOptions",
    "NotificationOutbox",
    "Reminders",
    "SlackChannelOptions",
    "TeamsChannelOptions",
    "WebhookChannel",
    "WebhookChannelOptions",
    "channel_from_options",
    "notification_outbox",
]

__getattr__ = lazy_getattr(__name__, _LAZY)
