"""One HTTP exchange read within a size cap and a wall-clock deadline, whatever the server sends.

A server under check may answer with more bytes than any answer needs, or drip them one at a
time so that no read ever times out. Reading through :func:`exchange` keeps at most ``max_bytes``
of an answer in memory, and ends the exchange once ``deadline_s`` has passed since it began,
however slowly the bytes arrive.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import anyio

from mcp_approval.errors import MCPApprovalError

__all__ = [
    "MAX_ANSWER_BYTES",
    "AnswerTooLarge",
    "AnswerTooSlow",
    "HttpAnswer",
    "HttpClient",
    "HttpResponse",
    "LimitExceeded",
    "exchange",
]

#: The largest answer the kit reads (an MCP answer is a few kilobytes; a ledger a few hundred).
MAX_ANSWER_BYTES = 4 * 1024 * 1024


class LimitExceeded(MCPApprovalError):
    """The server's answer broke a limit of the exchange (its size, or its wall-clock time)."""


class AnswerTooLarge(LimitExceeded):
    """The answer was larger than the cap: the rest was not read."""


class AnswerTooSlow(LimitExceeded, TimeoutError):
    """The answer was not complete within the deadline (however slowly its bytes came)."""


class HttpResponse(Protocol):
    """What :func:`exchange` reads of a streamed response (``httpx2.Response`` and ``httpx.Response``)."""

    @property
    def status_code(self) -> int:
        """The HTTP status."""

    @property
    def headers(self) -> Mapping[str, str]:
        """The response headers."""

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body, as it arrives."""


class HttpClient(Protocol):
    """An HTTP client that streams (``httpx2.AsyncClient``, or ``httpx.AsyncClient`` in tests)."""

    def stream(
        self, method: str, url: str, *, content: str | bytes | None = None, headers: Mapping[str, str] | None = None
    ) -> AbstractAsyncContextManager[Any]:
        """A streamed request; the response is read inside the block."""


@dataclass(frozen=True)
class HttpAnswer:
    """What came back: the status, the headers and the body (at most the cap)."""

    status: int
    headers: dict[str, str]
    body: bytes


async def exchange(
    http: HttpClient,
    url: str,
    content: str,
    headers: Mapping[str, str],
    *,
    max_bytes: int = MAX_ANSWER_BYTES,
    deadline_s: float | None = None,
    complete: Callable[[bytes], bool] | None = None,
) -> HttpAnswer:
    """POST ``content`` to ``url`` and read the answer, bounded in size and in time.

    ``complete(buffer)``, when given, says whether what arrived so far already holds the answer
    (an event stream may stay open after its response message): reading stops there.

    Raises:
        AnswerTooLarge: the answer exceeded ``max_bytes``.
        AnswerTooSlow: it was not complete ``deadline_s`` after the request began.
    """
    if deadline_s is None:
        return await _read(http, url, content, headers, max_bytes, complete)
    try:
        with anyio.fail_after(deadline_s):
            return await _read(http, url, content, headers, max_bytes, complete)
    except TimeoutError:
        raise AnswerTooSlow(f"no complete answer within {deadline_s:g}s") from None


async def _read(
    http: HttpClient,
    url: str,
    content: str,
    headers: Mapping[str, str],
    max_bytes: int,
    complete: Callable[[bytes], bool] | None,
) -> HttpAnswer:
    async with http.stream("POST", url, content=content, headers=headers) as response:
        buffer = bytearray()
        async for chunk in response.aiter_bytes():
            if len(buffer) + len(chunk) > max_bytes:
                raise AnswerTooLarge(f"the answer exceeded {max_bytes} bytes (the rest was not read)")
            buffer.extend(chunk)
            # Only where an event ends can the answer be complete: a blank line closes an event.
            tail = buffer[-(len(chunk) + 3) :]
            if complete is not None and (b"\n\n" in tail or b"\r\n\r\n" in tail) and complete(bytes(buffer)):
                break
        return HttpAnswer(response.status_code, dict(response.headers), bytes(buffer))
