"""Raw JSON-RPC over Streamable HTTP, as a 2026-07-28 client (or a 2025-11-25 one), bounded.

The kit must see the wire as any client does, so it builds every request itself: the per-request
``_meta`` envelope, the routing headers (``mcp-method``, ``mcp-name``), a bearer token. Every
answer is read through :func:`~mcp_approval.checks.bounded.exchange` (capped in size, and in
wall-clock time when a deadline is set) and kept in a :class:`Transcript` for the scenarios that
judge the run as a whole. The project's own tests speak to servers through the same wire.
"""

from __future__ import annotations

import base64
import itertools
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from mcp_approval.checks.bounded import MAX_ANSWER_BYTES, HttpClient, exchange
from mcp_approval.errors import MCPApprovalError
from mcp_approval.protocol import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    PROTOCOL_VERSION_2026,
    TASKS_EXTENSION,
)

__all__ = [
    "CLIENT_INFO",
    "LEGACY_PROTOCOL",
    "PROTOCOL",
    "TASKS",
    "Elicitation",
    "Exchange",
    "LegacySession",
    "MissingMember",
    "Reply",
    "Transcript",
    "Wire",
    "decode",
    "envelope",
    "header_value",
    "request_headers",
]

PROTOCOL = PROTOCOL_VERSION_2026
LEGACY_PROTOCOL = "2025-11-25"
TASKS = TASKS_EXTENSION
CLIENT_INFO = {"name": "mcp-approval-check", "version": "1"}
#: What a request declares of elicitation: form and URL mode (``True``), form only, or none.
Elicitation = bool | Literal["form"]
#: How much of the run's answers a transcript keeps for the scans over the whole run.
_TRANSCRIPT_BYTES = 32 * 1024 * 1024


def envelope(
    *, tasks: bool = True, elicitation: Elicitation = True, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The per-request ``_meta`` envelope a 2026-07-28 client sends (SEP-2575), plus ``extra``."""
    capabilities: dict[str, Any] = {}
    if tasks:
        capabilities["extensions"] = {TASKS_EXTENSION: {}}
    if elicitation:
        capabilities["elicitation"] = {"form": {}, "url": {}} if elicitation is True else {"form": {}}
    meta: dict[str, Any] = {
        META_PROTOCOL_VERSION: PROTOCOL,
        META_CLIENT_INFO: dict(CLIENT_INFO),
        META_CLIENT_CAPABILITIES: capabilities,
    }
    meta.update(extra or {})
    return meta


def request_headers(method: str, token: str | None) -> dict[str, str]:
    """The HTTP headers of one request (``mcp-name`` is added where the request names something)."""
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": PROTOCOL,
        "mcp-method": method,
    }
    if token:
        headers["authorization"] = f"Bearer {token}"
    return headers


class MissingMember(MCPApprovalError, LookupError):
    """The answer lacks the member asked for (a ``result`` where an ``error`` came, or none at all)."""


@dataclass(frozen=True)
class Reply:
    """One HTTP answer: its status, headers, the JSON-RPC message (``{}`` when none) and the raw text."""

    status: int
    body: dict[str, Any]
    text: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    #: The JSON-RPC id of the request this answers.
    request_id: int | None = None

    @property
    def has_result(self) -> bool:
        """The message carries a ``result`` object."""
        return isinstance(self.body.get("result"), dict)

    @property
    def is_error(self) -> bool:
        """The message carries an ``error`` object."""
        return isinstance(self.body.get("error"), dict)

    @property
    def result(self) -> dict[str, Any]:
        """The ``result`` object (:class:`MissingMember` when there is none)."""
        if not self.has_result:
            raise MissingMember(f"expected a result, got HTTP {self.status} {self.body or self.text[:300]!r}")
        value: dict[str, Any] = self.body["result"]
        return value

    @property
    def error(self) -> dict[str, Any]:
        """The ``error`` object (:class:`MissingMember` when there is none)."""
        if not self.is_error:
            raise MissingMember(f"expected an error, got HTTP {self.status} {self.body or self.text[:300]!r}")
        value: dict[str, Any] = self.body["error"]
        return value

    def brief(self) -> str:
        """The answer in one line, for evidence."""
        if self.is_error:
            return f"HTTP {self.status} error {self.error.get('code')}: {self.error.get('message')}"
        if not self.has_result:
            return f"HTTP {self.status}: {self.text[:160]}"
        shown = {key: self.result[key] for key in ("resultType", "status", "isError", "taskId") if key in self.result}
        return f"HTTP {self.status} {json.dumps(shown)}"


@dataclass(frozen=True)
class Exchange:
    """A request of the run and what came back (its text kept for the scans over the run)."""

    method: str
    reply: Reply


@dataclass
class Transcript:
    """Every exchange of a run, up to a budget of answer bytes (beyond it, ``dropped`` counts them)."""

    exchanges: list[Exchange] = field(default_factory=list)
    kept_bytes: int = 0
    dropped: int = 0
    budget: int = _TRANSCRIPT_BYTES

    def add(self, method: str, reply: Reply) -> None:
        """Keep one exchange, unless the budget is spent."""
        if self.kept_bytes + len(reply.text) > self.budget:
            self.dropped += 1
            return
        self.kept_bytes += len(reply.text)
        self.exchanges.append(Exchange(method, reply))

    def texts(self) -> list[str]:
        """The text of every kept answer."""
        return [item.reply.text for item in self.exchanges]


class Wire:
    """Requests to one MCP endpoint as the bearer of one token (or of none).

    ``url`` is the endpoint (relative to the client's base URL, or absolute). Answers are read
    within ``max_bytes`` and, when ``deadline_s`` is set, within that many seconds each
    (:class:`~mcp_approval.checks.bounded.LimitExceeded` otherwise); ``transcript``, when given,
    keeps them.
    """

    def __init__(
        self,
        http: HttpClient,
        *,
        token: str | None = None,
        url: str = "/mcp",
        transcript: Transcript | None = None,
        elicitation: Elicitation = True,
        deadline_s: float | None = None,
        max_bytes: int = MAX_ANSWER_BYTES,
    ) -> None:
        self.http = http
        self.token = token
        self.url = url
        self.transcript = transcript
        self.elicitation = elicitation
        self.deadline_s = deadline_s
        self.max_bytes = max_bytes
        self._ids = itertools.count(1)

    def as_principal(self, token: str | None) -> Wire:
        """The same connection and limits, authenticated as another principal (one transcript)."""
        return Wire(
            self.http,
            token=token,
            url=self.url,
            transcript=self.transcript,
            elicitation=self.elicitation,
            deadline_s=self.deadline_s,
            max_bytes=self.max_bytes,
        )

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        meta: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        name: str | None = None,
        tasks: bool = True,
    ) -> Reply:
        """Send one request and read its answer.

        ``params`` may carry its own ``_meta``; otherwise ``meta``, or the envelope (declaring
        tasks when ``tasks``). ``name`` overrides the ``mcp-name`` header (by default the
        ``taskId`` or ``name`` param); a header given as ``""`` in ``headers`` is left out.
        """
        params = dict(params or {})
        params.setdefault("_meta", meta if meta is not None else envelope(tasks=tasks, elicitation=self.elicitation))
        sent = request_headers(method, self.token)
        routing = name if name is not None else params.get("taskId", params.get("name"))
        if isinstance(routing, str):
            sent["mcp-name"] = header_value(routing)
        sent.update(headers or {})
        sent = {key: value for key, value in sent.items() if value != ""}
        message_id = next(self._ids)
        payload = {"jsonrpc": "2.0", "id": message_id, "method": method, "params": params}
        answer = await exchange(
            self.http,
            self.url,
            json.dumps(payload),
            sent,
            max_bytes=self.max_bytes,
            deadline_s=self.deadline_s,
            complete=lambda buffer: _holds_response(buffer, message_id),
        )
        text = answer.body.decode(errors="replace")
        message = decode(text, answer.headers.get("content-type", ""))
        reply = Reply(answer.status, message, text, answer.headers, message_id)
        if self.transcript is not None:
            self.transcript.add(method, reply)
        return reply

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> int:
        """Send a notification (no ``id``); the HTTP status of the answer."""
        params = dict(params or {})
        params.setdefault("_meta", envelope(elicitation=self.elicitation))
        payload = {"jsonrpc": "2.0", "method": method, "params": params}
        answer = await exchange(
            self.http,
            self.url,
            json.dumps(payload),
            request_headers(method, self.token),
            max_bytes=self.max_bytes,
            deadline_s=self.deadline_s,
        )
        return answer.status

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None, **kwargs: Any) -> Reply:
        """``tools/call``; ``kwargs`` as :meth:`request` takes them."""
        return await self.request("tools/call", {"name": name, "arguments": arguments or {}}, **kwargs)

    async def call(
        self, name: str, arguments: dict[str, Any], *, tasks: bool = True, extra: dict[str, Any] | None = None
    ) -> Reply:
        """``tools/call`` with more params (``requestState``, ``inputResponses``, a legacy ``task``)."""
        params = {"name": name, "arguments": arguments, **(extra or {})}
        return await self.request("tools/call", params, tasks=tasks)

    async def get(self, task_id: str, **kwargs: Any) -> Reply:
        """``tasks/get``."""
        return await self.request("tasks/get", {"taskId": task_id}, **kwargs)

    async def update(self, task_id: str, responses: dict[str, Any], **kwargs: Any) -> Reply:
        """``tasks/update`` with ``inputResponses``."""
        return await self.request("tasks/update", {"taskId": task_id, "inputResponses": responses}, **kwargs)

    async def cancel(self, task_id: str, **kwargs: Any) -> Reply:
        """``tasks/cancel``."""
        return await self.request("tasks/cancel", {"taskId": task_id}, **kwargs)


class LegacySession:
    """A 2025-11-25 client over Streamable HTTP: ``initialize`` (declaring URL elicitation), then calls."""

    def __init__(
        self, http: HttpClient, headers: dict[str, str], *, url: str = "/mcp", deadline_s: float | None = None
    ) -> None:
        self.http = http
        self.headers = headers
        self.url = url
        self.deadline_s = deadline_s
        self._ids = itertools.count(2)

    @classmethod
    async def open(
        cls,
        http: HttpClient,
        token: str,
        capabilities: dict[str, Any] | None = None,
        *,
        url: str = "/mcp",
        deadline_s: float | None = None,
    ) -> LegacySession:
        """Initialize a session as the bearer of ``token`` (by default declaring ``elicitation.url``).

        Raises:
            MissingMember: the server did not answer ``initialize`` with a 2025-11-25 result.
        """
        headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "authorization": f"Bearer {token}",
        }
        params = {
            "protocolVersion": LEGACY_PROTOCOL,
            "capabilities": capabilities if capabilities is not None else {"elicitation": {"url": {}}},
            "clientInfo": dict(CLIENT_INFO),
        }
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
        answer = await exchange(http, url, json.dumps(initialize), headers, deadline_s=deadline_s)
        message = decode(answer.body.decode(errors="replace"), answer.headers.get("content-type", ""))
        result = message.get("result")
        version = result.get("protocolVersion") if isinstance(result, dict) else None
        if answer.status != 200 or version != LEGACY_PROTOCOL:
            raise MissingMember(f"initialize at {LEGACY_PROTOCOL} answered HTTP {answer.status} {message}")
        headers = {**headers, "mcp-protocol-version": LEGACY_PROTOCOL}
        if "mcp-session-id" in answer.headers:
            headers["mcp-session-id"] = answer.headers["mcp-session-id"]
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await exchange(http, url, json.dumps(initialized), headers, deadline_s=deadline_s)
        return cls(http, headers, url=url, deadline_s=deadline_s)

    async def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The JSON-RPC response (``result`` or ``error``) of one ``tools/call``."""
        message_id = next(self._ids)
        payload = {
            "jsonrpc": "2.0",
            "id": message_id,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
        answer = await exchange(
            self.http,
            self.url,
            json.dumps(payload),
            self.headers,
            deadline_s=self.deadline_s,
            complete=lambda buffer: _holds_response(buffer, message_id),
        )
        return decode(answer.body.decode(errors="replace"), answer.headers.get("content-type", ""))


def header_value(text: str) -> str:
    """``text`` as an HTTP header value: itself when it is printable ASCII, else SEP-2243's
    ``=?base64?...?=`` form (a task id is the server's to choose, and may be anything)."""
    if text.isascii() and text.isprintable() and text == text.strip():
        return text
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


def decode(text: str, content_type: str) -> dict[str, Any]:
    """The JSON-RPC response in a JSON body or an event stream (``{}`` when there is none)."""
    if content_type.startswith("text/event-stream"):
        for message in _events(text):
            if "id" in message and ("result" in message or "error" in message):
                return message
        return {}
    message = _json(text)
    return message if isinstance(message, dict) else {}


def _holds_response(buffer: bytes, message_id: int) -> bool:
    """Whether an event stream read so far already holds the response to ``message_id``."""
    return any(message.get("id") == message_id for message in _events(buffer.decode(errors="replace")))


def _events(text: str) -> list[dict[str, Any]]:
    """The JSON objects of an event stream's ``data:`` lines (one event may span several)."""
    found: list[dict[str, Any]] = []
    for event in text.replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(line[5:].lstrip(" ") for line in event.split("\n") if line.startswith("data:"))
        value = _json(data) if data else None
        if isinstance(value, dict):
            found.append(value)
    return found


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
        return None
