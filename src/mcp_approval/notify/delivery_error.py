"""The error every notification channel raises when its receiver did not accept a notification.

Its own module, so the channels of their own modules (Slack, Teams) raise it without importing
:mod:`mcp_approval.notify.channels`, which builds them. Import it from there, as before.
"""

from __future__ import annotations

from mcp_approval.errors import MCPApprovalError

__all__ = ["DeliveryError"]


class DeliveryError(MCPApprovalError, RuntimeError):
    """The receiver did not accept a notification (it is retried later)."""
