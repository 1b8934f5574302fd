"""ARAP callback notifications from the reference ARS (ARAP Callback profile).

A submission may name ``callback.endpoint``; it is accepted only when it is a well-formed URL (no
user info, a valid port, no fragment), its origin is on the
configured allowlist, it is ``https`` (``http`` only on loopback in dev mode), and it does not
target a loopback, link-local or private address unless dev mode is on (SSRF). Host names are
not resolved: an allowlisted name is trusted to be what the operator meant.

When a task ends, the ARS POSTs ``{state, task: {id, status, status_endpoint}}`` (no ``result``:
a notification only, the PEP fetches the status) signed with
``X-Approval-Signature: t=<unix s>,v1=<hex HMAC-SHA256 over "<t>.<body>">`` (the scheme of
:func:`mcp_approval.approval.callbacks.sign_callback`). Delivery is retried a few times with
backoff; it is best effort and not durable across a restart, which is why a PEP always polls too.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
from collections.abc import Sequence
from typing import Any, Final
from urllib.parse import urlsplit

import httpx2

from mcp_approval.approval.callbacks import SIGNATURE_HEADER, sign_callback
from mcp_approval.clock import Clock
from mcp_approval.hosts import callback_url_problem, is_loopback_host

__all__ = ["RETRY_DELAYS_S", "CallbackSender", "callback_problem", "origin"]

logger = logging.getLogger("mcp_approval.reference")

#: Delays before each retry of a failed delivery.
RETRY_DELAYS_S: Final = (0.5, 2.0, 8.0)


def origin(url: str) -> str:
    """``scheme://host[:port]`` of ``url``, lower-cased, default ports dropped."""
    parts = urlsplit(url)
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    port = parts.port
    default = {"https": 443, "http": 80}.get(scheme)
    netloc = f"[{host}]" if ":" in host else host
    return f"{scheme}://{netloc}" + (f":{port}" if port is not None and port != default else "")


def _internal(host: str) -> bool:
    if is_loopback_host(host):
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return address.is_private or address.is_link_local or address.is_reserved or address.is_unspecified


def callback_problem(endpoint: Any, allowlist: Sequence[str], *, dev_mode: bool) -> str | None:
    """Why ``endpoint`` may not receive callbacks, or ``None`` when it may."""
    if not isinstance(endpoint, str):
        return "callback.endpoint must be a URL string"
    malformed = callback_url_problem(endpoint)
    if malformed is not None:
        return f"callback.endpoint {malformed}"
    parts = urlsplit(endpoint)
    host = parts.hostname or ""
    if parts.scheme == "http" and not (dev_mode and is_loopback_host(host)):
        return "callback.endpoint must use https (http only to loopback in dev mode)"
    if _internal(host) and not dev_mode:
        return "callback.endpoint targets a loopback, link-local or private address"
    if origin(endpoint) not in {origin(entry) for entry in allowlist}:
        return "callback.endpoint is not on this service's callback allowlist"
    return None


class CallbackSender:
    """Sends signed task notifications in the background.

    Args:
        secret: the shared HMAC secret.
        clock: the source of signature timestamps.
    """

    def __init__(self, secret: str, clock: Clock) -> None:
        self._secret = secret
        self._clock = clock
        self._client = httpx2.AsyncClient(timeout=10, follow_redirects=False)
        self._tasks: set[asyncio.Task[None]] = set()
        #: Deliveries that got a 2xx answer (endpoint, body), for inspection.
        self.delivered: list[tuple[str, dict[str, Any]]] = []

    def send(self, endpoint: str, body: dict[str, Any]) -> None:
        """Deliver ``body`` to ``endpoint`` in the background."""
        task = asyncio.create_task(self._deliver(endpoint, body))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def stop(self) -> None:
        """Abandon deliveries in progress and close the HTTP client."""
        tasks, self._tasks = list(self._tasks), set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._client.aclose()

    async def _deliver(self, endpoint: str, body: dict[str, Any]) -> None:
        raw = json.dumps(body, separators=(",", ":")).encode()
        for delay in (0.0, *RETRY_DELAYS_S):
            if delay:
                await asyncio.sleep(delay)  # backoff between attempts, not a synchronization stand-in
            signature = sign_callback(self._secret, raw, self._clock.now_ms() // 1000)
            headers = {"Content-Type": "application/json", SIGNATURE_HEADER: signature}
            try:
                response = await self._client.post(endpoint, content=raw, headers=headers)
            except httpx2.HTTPError as exc:
                logger.warning("callback to %s failed: %s", origin(endpoint), exc)
                continue
            if response.is_success:
                self.delivered.append((endpoint, body))
                return
            logger.warning("callback to %s answered %s", origin(endpoint), response.status_code)
        logger.warning("gave up on a callback to %s", origin(endpoint))
