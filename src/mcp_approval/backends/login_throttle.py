"""A limit on failed reviewer sign-ins, per client address.

The reviewer console (``POST /console/login``) and the reviewer API (every ``/approvals`` request)
take a bearer token. Without a limit one client could try tokens as fast as the server answers.
:class:`FailedLoginThrottle` remembers each client's recent failures in a sliding window; once a
client has ``max_failures`` of them within ``window_s`` seconds it is refused, without its token
being checked, until the oldest of those failures leaves the window.

One instance is meant to be shared by the console and the reviewer API of one app, so failures on
either count against both::

    throttle = FailedLoginThrottle(clock)
    routes = [*reviewer_routes(backend, authenticate, throttle=throttle),
              *console_routes(backend, authenticate, audit, clock=clock, throttle=throttle)]

The client is the peer address of the connection (:func:`client_key`). ``X-Forwarded-For`` is not
trusted: anyone can send it, so honouring it would let a client pick a fresh key per attempt. The
servers let uvicorn replace the peer with the forwarded address only for the proxies configured in
``trusted_proxies``; behind any other proxy every client shares the proxy's address, and its limit.
"""

from __future__ import annotations

from collections import OrderedDict, deque

from starlette.requests import Request

from mcp_approval.clock import Clock, SystemClock

__all__ = [
    "DEFAULT_MAX_CLIENTS",
    "DEFAULT_MAX_FAILURES",
    "DEFAULT_WINDOW_S",
    "FailedLoginThrottle",
    "client_key",
]

#: Failed authentications a client may make within the window before it is refused.
DEFAULT_MAX_FAILURES = 10
#: The length of the sliding window, in seconds.
DEFAULT_WINDOW_S = 300
#: The most clients tracked at once; beyond it the client whose last failure is oldest is forgotten.
DEFAULT_MAX_CLIENTS = 10_000


def client_key(request: Request) -> str:
    """The key a request's failures are counted under: its peer address.

    A request without a peer (some test or embedded transports) counts under ``""``, so such
    clients share one limit rather than escaping it.
    """
    return request.client.host if request.client is not None else ""


class FailedLoginThrottle:
    """Counts failed authentications per client key and says when a client must wait.

    Successes are not recorded and do not clear a client's failures: a client holding one valid
    token could otherwise interleave it with guesses to keep guessing for ever. Nor does one
    client's success or failure affect any other client.

    Not thread-safe; meant for one event loop, where no method awaits.
    """

    def __init__(
        self,
        clock: Clock | None = None,
        *,
        max_failures: int = DEFAULT_MAX_FAILURES,
        window_s: int = DEFAULT_WINDOW_S,
        max_clients: int = DEFAULT_MAX_CLIENTS,
    ) -> None:
        """A throttle allowing ``max_failures`` failures per ``window_s`` seconds to each of ``max_clients``.

        Raises:
            ValueError: a limit that is not positive.
        """
        if max_failures < 1 or window_s < 1 or max_clients < 1:
            raise ValueError("max_failures, window_s and max_clients must all be at least 1")
        self._clock = clock or SystemClock()
        self._max_failures = max_failures
        self._window_ms = window_s * 1000
        self._max_clients = max_clients
        # Key -> times of its latest failures (at most max_failures: older ones can never matter again),
        # ordered by each key's latest failure so the first entry is the one to evict.
        self._failures: OrderedDict[str, deque[int]] = OrderedDict()

    def retry_after_s(self, key: str) -> int | None:
        """Whole seconds (at least 1) until ``key`` may try again, or ``None`` if it may try now."""
        failures = self._recent(key)
        if failures is None or len(failures) < self._max_failures:
            return None
        wait_ms = failures[0] + self._window_ms - self._clock.now_ms()
        return max(1, -(-wait_ms // 1000))  # round up: retrying at the advertised time must succeed

    def record_failure(self, key: str) -> None:
        """Count one failed authentication by ``key`` now."""
        failures = self._recent(key)
        if failures is None:
            if len(self._failures) >= self._max_clients:
                self._failures.popitem(last=False)
            failures = self._failures[key] = deque(maxlen=self._max_failures)
        else:
            self._failures.move_to_end(key)
        failures.append(self._clock.now_ms())

    def tracked_clients(self) -> int:
        """How many client keys are held in memory (never more than ``max_clients``)."""
        return len(self._failures)

    def _recent(self, key: str) -> deque[int] | None:
        """``key``'s failures still inside the window, dropping older ones (and the key, if none are left)."""
        failures = self._failures.get(key)
        if failures is None:
            return None
        horizon = self._clock.now_ms() - self._window_ms
        while failures and failures[0] <= horizon:
            failures.popleft()
        if not failures:
            del self._failures[key]
            return None
        return failures
