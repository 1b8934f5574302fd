"""Notifications: approval events told to webhooks and people, from the audit chain as an outbox.

Configured as ``[notifications]`` (:class:`NotificationOptions`) and chosen per template with
``notify``; delivered by :class:`NotificationOutbox` in the background of every serving process.
"""

from mcp_approval.notify.channels import AppriseChannel, Channel, DeliveryError, WebhookChannel, channel_from_options
from mcp_approval.notify.messages import EVENT_TYPES, MessageBuilder, Notification
from mcp_approval.notify.options import (
    AppriseChannelOptions,
    ChannelOptions,
    NotificationOptions,
    WebhookChannelOptions,
)
from mcp_approval.notify.outbox import CONSUMER_PREFIX, NotificationOutbox, notification_outbox

__all__ = [
    "CONSUMER_PREFIX",
    "EVENT_TYPES",
    "AppriseChannel",
    "AppriseChannelOptions",
    "Channel",
    "ChannelOptions",
    "DeliveryError",
    "MessageBuilder",
    "Notification",
    "NotificationOptions",
    "NotificationOutbox",
    "WebhookChannel",
    "WebhookChannelOptions",
    "channel_from_options",
    "notification_outbox",
]
