"""Host names and ports on this machine: which hosts stay local, and loopback ports for local servers.

Plain ``http`` is acceptable only where traffic never leaves the machine (development switches,
loopback approval pages), so every such rule asks :func:`is_loopback_host`.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

__all__ = [
    "PORT_SLICE_VARIABLE",
    "callback_url_problem",
    "is_loopback_host",
    "is_safe_transport",
    "unused_loopback_port",
]

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


def is_safe_transport(url: str, *, allow_loopback_http: bool = True) -> bool:
    """Whether what is sent to ``url`` stays off the network in clear.

    That is ``https`` with a host, or, when ``allow_loopback_http``, plain ``http`` to this
    machine. A URL that does not parse is not safe.
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:  # an unparsable netloc (a bad port, an unclosed bracket)
        return False
    if parts.scheme == "https":
        return bool(host)
    return allow_loopback_http and parts.scheme == "http" and is_loopback_host(host)


def callback_url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a callback endpoint (not absolute http(s), user info, a bad port, a
    fragment), or ``None``. Trust (https, allowlists) is the caller's further rule."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number from 0 to 65535
    except ValueError:  # also an unclosed IPv6 bracket
        return "not a valid URL (check its host and port)"
    if parts.scheme not in ("https", "http") or not parts.hostname:
        return "not an absolute http(s) URL"
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        return "must not carry user info (user:password@)"
    if parts.port == 0 or parts.netloc.endswith(":"):
        return "has an empty or zero port"
    if parts.fragment:
        return "must not have a fragment"
    return None


_HANDED_OUT: set[int] = set()
_HANDED_OUT_LOCK = threading.Lock()

#: ``"K/N"``: hand out only ports whose number halved is ``K`` modulo ``N``. Several processes that each
#: start servers at once (parallel test workers, say) set distinct slices, so a port one of them
#: has just been given and not yet bound is never given to another.
PORT_SLICE_VARIABLE = "MCP_APPROVAL_PORT_SLICE"


def _port_slice() -> tuple[int, int]:
    value = os.environ.get(PORT_SLICE_VARIABLE, "")
    if not value:
        return 0, 1
    index, _, count = value.partition("/")
    try:
        slice_index, slice_count = int(index), int(count)
    except ValueError:
        raise ValueError(f"{PORT_SLICE_VARIABLE} must look like K/N, not {value!r}") from None
    if slice_count < 1 or not 0 <= slice_index < slice_count:
        raise ValueError(f"{PORT_SLICE_VARIABLE}={value!r}: need 0 <= K < N")
    return slice_index, slice_count


def unused_loopback_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now and this process has not handed out before.

    The port is free when returned, and the caller's server binds it later. Remembering every port
    handed out keeps two servers this process starts at once from being given the same one, which
    would send one server's clients to the other. Between processes, the slice named by
    ``MCP_APPROVAL_PORT_SLICE`` does the same. Where the kernel's ephemeral range leaves room below
    it, the port comes from there: an ephemeral port (what ``bind(0)`` returns) can meanwhile
    become the local port of some outgoing connection, and the server's bind then fails.
    """
    slice_index, slice_count = _port_slice()
    with _HANDED_OUT_LOCK:
        for port in _candidate_ports():
            # Halved, because Linux gives bind() odd ports by preference (even ones go to connect()).
            if (port >> 1) % slice_count == slice_index and port not in _HANDED_OUT and _free(port):
                _HANDED_OUT.add(port)
                return port
    raise RuntimeError("no unused TCP port on 127.0.0.1")


#: The lowest port handed out from below the ephemeral range (clear of the usual services' ports).
_LISTEN_PORTS_FROM: Final = 20_000
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _candidate_ports() -> Iterator[int]:
    """Ports below the ephemeral range from a random point, when there are enough; else the kernel's picks."""
    try:
        ephemeral_from = int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_from = 49_152  # the IANA dynamic range (macOS, Windows)
    if ephemeral_from - _LISTEN_PORTS_FROM >= 1_000:
        below = range(_LISTEN_PORTS_FROM, ephemeral_from)
        start = secrets.randbelow(len(below))
        yield from below[start:]
        yield from below[:start]
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            yield int(sock.getsockname()[1])


def _free(port: int) -> bool:
    """Whether ``port`` on 127.0.0.1 can be bound now."""
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
