"""Host names: which ones stay on this machine.

Plain ``http`` is acceptable only where traffic never leaves the machine (development switches,
loopback approval pages), so every such rule asks :func:`is_loopback_host`.
"""

from __future__ import annotations

import ipaddress

_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain"})


def is_loopback_host(host: str | None) -> bool:
    """Whether ``host`` (a URL's host name, IPv6 literals with or without brackets) is this machine."""
    if not host:
        return False
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
