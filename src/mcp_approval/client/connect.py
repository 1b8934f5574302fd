"""One call to a connected client: :func:`mcp_client` for a URL (Streamable HTTP) or a command (stdio).

::

    async with mcp_client("https://mcp.example.com/mcp", tasks=True, auth="my-token") as client:
        result = await client.call_tool("wire_transfer", {"to": "acme", "amount": 50_000},
                                        call_key="run-7/call-3")

A keyed call never runs twice: its task id is journaled before the call waits on it, so calling
again with the same ``call_key`` (after a :class:`TaskPendingError`, a crash or a restart) polls
that task, and a finished call returns its recorded outcome. The key is bound to the server, the
tool and the arguments; reusing it for another call raises :class:`ClientUsageError`.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx2
import mcp_types as types
import platformdirs
from mcp import Client, StdioServerParameters
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp_types import InputResponses, RequestParamsMeta

from mcp_approval.client.calls import (
    CallJournal,
    CallOutcome,
    CallRecord,
    CallTarget,
    SQLiteCallJournal,
    keyed_call,
)
from mcp_approval.client.errors import (
    ResponseWatch,
    ServerAccessError,
    ServerAuthenticationError,
    ServerAuthorizationError,
    access_error,
)
from mcp_approval.client.tasks import InputHandler, TaskCancelledError, TaskFailedError, TasksClient
from mcp_approval.errors import MCPApprovalError
from mcp_approval.hosts import is_safe_transport

__all__ = [
    "DEFAULT_CALL_JOURNAL",
    "AgentClient",
    "CallInDoubtError",
    "ClientUsageError",
    "default_call_journal_path",
    "mcp_client",
]

#: The name of the SQLite file keyed calls are journaled in when no ``call_journal`` is given.
DEFAULT_CALL_JOURNAL = "mcp-calls.sqlite3"
#: The application directory under the user's data directory (``platformdirs``).
_DATA_DIRECTORY = "mcp-approval"


def default_call_journal_path() -> Path:
    """Where keyed calls are journaled by default: ``mcp-calls.sqlite3`` in the user's data directory.

    That is ``$XDG_DATA_HOME/mcp-approval`` (``~/.local/share/mcp-approval``) on Linux,
    ``~/Library/Application Support/mcp-approval`` on macOS and
    ``%LOCALAPPDATA%\\mcp-approval`` on Windows; the directory is created (owner only) on first use.
    One journal per user, whatever the working directory, so a key is found again from anywhere.
    """
    return Path(platformdirs.user_data_dir(_DATA_DIRECTORY, appauthor=False)) / DEFAULT_CALL_JOURNAL


class ClientUsageError(MCPApprovalError, ValueError):
    """:func:`mcp_client` was given options that cannot work together, or a ``call_key`` was reused for
    another call (the message says which); nothing was sent."""


class CallInDoubtError(MCPApprovalError):
    """A keyed call was sent but neither a task id nor a result is on record for it.

    The tool may or may not have run; calling it again could run it twice, so the call is not
    repeated. ``reason`` says what is known: the call is still in flight in this client, it
    failed here before its answer came back (a timeout, a closed connection), or an earlier or
    other client sent it and recorded nothing after. ``remote_kind`` is ``call_in_doubt``; check
    the server's records, then use a new key.
    """

    remote_kind = "call_in_doubt"

    def __init__(self, call_key: str, reason: str) -> None:
        super().__init__(
            f"call {call_key!r} has no task id or result on record: {reason}. The tool may have run, "
            "so the call is not sent again; check the server's records, then use a new key"
        )
        self.call_key = call_key
        self.reason = reason


#: Errors the client raises itself after sending a request: the server may have run the call.
_ANSWER_LOST = frozenset({types.REQUEST_TIMEOUT, types.CONNECTION_CLOSED})


@dataclass(frozen=True)
class _CallOptions:
    """The SDK's own ``call_tool`` options, passed through unchanged."""

    read_timeout_seconds: float | None
    progress_callback: ProgressFnT | None
    input_responses: InputResponses | None
    request_state: str | None
    meta: RequestParamsMeta | None


@dataclass
class AgentClient(Client):
    """The SDK's :class:`mcp.Client` with keyed calls; made by :func:`mcp_client`."""

    tasks: TasksClient | None = None
    """The tasks extension, when the client declares it (``tasks=True``)."""

    call_journal: CallJournal | str | Path | None = None
    """Where keyed calls are journaled: a :class:`CallJournal`, or the path of a SQLite file (opened on
    first use); ``None``: :func:`default_call_journal_path`."""

    http_client: httpx2.AsyncClient | None = None
    """The HTTP client of a Streamable HTTP connection, closed with the client."""

    response_watch: ResponseWatch | None = None
    """Watches the HTTP connection's answers so a ``401`` or ``403`` is raised as a typed error
    (set by :func:`mcp_client`)."""

    server_id: str | None = None
    """The server keyed calls are bound to (see :class:`CallTarget`); by default derived from
    ``server``: its URL, ``stdio:<command line>`` or ``in-process:<name>``. A ``Transport`` object
    has none, so keyed calls through one need it."""

    _journal: CallJournal | None = field(default=None, init=False, repr=False)
    _opened_journal: SQLiteCallJournal | None = field(default=None, init=False, repr=False)
    _in_flight: set[str] = field(default_factory=set, init=False, repr=False)
    # What happened, in this client, to keyed calls whose answer never came back.
    _lost: dict[str, str] = field(default_factory=dict, init=False, repr=False)

    async def __aenter__(self) -> AgentClient:
        """Connect (the handshake); the HTTP client is closed if it fails.

        Raises:
            ServerAuthenticationError: the server answered ``401`` (no, a wrong or an expired credential).
            ServerAuthorizationError: the server answered ``403`` (the credential is not enough).
            ServerConnectionError: the server could not be reached.
        """
        try:
            await super().__aenter__()
        except Exception as failed:
            await self._close_http()
            self._raise_typed(failed)
            raise
        except BaseException:
            await self._close_http()
            raise
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc_val: BaseException | None, exc_tb: Any) -> None:
        """Disconnect and close the HTTP client.

        An exception raised inside ``async with`` leaves it as itself: the SDK's task groups wrap it
        in (nested) exception groups on the way out, which an ``except TaskPendingError`` around
        the block would miss, so a group holding nothing but that exception is undone.
        """
        try:
            await super().__aexit__(exc_type, exc_val, exc_tb)
        except BaseExceptionGroup as group:
            if exc_val is None or not _only(group, exc_val):
                raise
            # Returning lets exc_val itself propagate, with its own traceback.
        finally:
            await self._close_http()
            if self._opened_journal is not None:
                self._opened_journal.close()
                self._journal = self._opened_journal = None

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        read_timeout_seconds: float | None = None,
        progress_callback: ProgressFnT | None = None,
        *,
        input_responses: InputResponses | None = None,
        request_state: str | None = None,
        meta: RequestParamsMeta | None = None,
        call_key: str | None = None,
    ) -> types.CallToolResult:
        """Call a tool (as :meth:`mcp.Client.call_tool`); with ``call_key``, at most once for that key.

        A keyed call is journaled before it is sent, its task id before the call waits on the
        task, and its outcome when it ends. Called again with the same key, it polls the
        journaled task, or returns (or raises) the recorded outcome, instead of calling the tool.

        The key is bound to this server, ``name`` and a digest of ``arguments``: the same key
        with another server, tool or arguments is refused before anything is sent.

        Raises:
            TaskPendingError: the task is still open after ``task_wait_s``; call again with the same key.
            TaskFailedError, TaskCancelledError: the task ended so (again, from the record, on a repeat).
            CallInDoubtError: the keyed call was sent but nothing came back on record (its ``reason``
                says what is known).
            ClientUsageError: ``call_key`` names another call (nothing is sent).
            ServerAccessError: the server refused the credential or could not be reached (see
                :func:`mcp_client`).
        """
        options = _CallOptions(read_timeout_seconds, progress_callback, input_responses, request_state, meta)
        if call_key is None:
            return await self._send(name, arguments, options)
        target = CallTarget.of(self.server_identity(), name, arguments)
        journal = self._call_journal()
        record = await journal.get(call_key)
        if record is None:
            return await self._first_call(journal, call_key, target, arguments, options)
        mismatch = record.mismatch(target)
        if mismatch is not None:
            raise ClientUsageError(
                f"call_key {call_key!r} names another call ({mismatch}); nothing was sent. Use a new key for a new call"
            )
        return await self._repeat_call(journal, record)

    async def resume_call(self, name: str, arguments: dict[str, Any] | None, *, call_key: str) -> types.CallToolResult:
        """Go on with the keyed call ``call_key`` made earlier through this server and journal; never a first call.

        As :meth:`call_tool` with a key that is on record: its task is polled, or its recorded
        outcome returned. A key this client's journal does not hold, or holds for another server,
        tool or arguments, is refused before anything is sent (:meth:`check_resumable`).

        Raises:
            ClientUsageError: ``call_key`` is not on record here, or names another call (nothing is sent).
            TaskPendingError, TaskFailedError, TaskCancelledError, CallInDoubtError: as :meth:`call_tool`.
        """
        record = await self.check_resumable(name, arguments, call_key=call_key)
        return await self._repeat_call(self._call_journal(), record)

    async def check_resumable(self, name: str, arguments: dict[str, Any] | None, *, call_key: str) -> CallRecord:
        """The journal's record of the keyed call ``call_key`` to ``name`` with ``arguments`` on this server.

        Nothing is sent. A call not made through this client's journal, or made on another server
        or for another tool or arguments, would be a new call if sent here: it is refused.

        Raises:
            ClientUsageError: ``call_key`` is not on record here, or names another call.
        """
        target = CallTarget.of(self.server_identity(), name, arguments)
        record = await self._call_journal().get(call_key)
        if record is None:
            raise ClientUsageError(
                f"call {call_key!r} ({name}) is not in the call journal of this client of {target.server}: it was "
                "not made through it, so nothing was sent. Resume it with the client of the server it was made on"
            )
        if record.server is not None and record.server != target.server:
            raise ClientUsageError(
                f"call {call_key!r} was made on {record.server}, not on {target.server}; nothing was sent. "
                "Resume it with the client of the server it was made on"
            )
        mismatch = record.mismatch(target)
        if mismatch is not None:
            raise ClientUsageError(f"call_key {call_key!r} names another call ({mismatch}); nothing was sent")
        return record

    async def journaled_task(self, task_id: str) -> CallRecord | None:
        """The journaled keyed call this server made task ``task_id`` for (``None``: not one of this client's)."""
        record = await self._call_journal().find_task(task_id)
        if record is None or record.server not in (None, self.server_identity()):
            return None
        return record

    def server_identity(self) -> str:
        """The server keyed calls are bound to: :attr:`server_id`, or the URL, command or name of ``server``.

        Raises:
            ClientUsageError: the client reaches its server through a ``Transport`` object and has no ``server_id``.
        """
        identity = self.server_id or _identity_of(self.server)
        if identity is None:
            raise ClientUsageError("a keyed call through a Transport object needs server_id= (the server it reaches)")
        return identity

    async def _send(self, name: str, arguments: dict[str, Any] | None, options: _CallOptions) -> types.CallToolResult:
        try:
            return await super().call_tool(
                name,
                arguments,
                options.read_timeout_seconds,
                options.progress_callback,
                input_responses=options.input_responses,
                request_state=options.request_state,
                meta=options.meta,
            )
        except Exception as failed:
            self._raise_typed(failed)
            raise

    def _raise_typed(self, failed: Exception) -> None:
        """Raise ``failed`` as a :class:`ServerAccessError` naming the server, when it is one."""
        url = self.server_id or _identity_of(self.server) or "the server"
        typed: ServerAccessError | None = access_error(url, failed, self.response_watch)
        if typed is not None:
            raise typed from failed

    async def _first_call(
        self,
        journal: CallJournal,
        call_key: str,
        target: CallTarget,
        arguments: dict[str, Any] | None,
        options: _CallOptions,
    ) -> types.CallToolResult:
        await journal.begin(call_key, target)
        self._in_flight.add(call_key)
        try:
            with keyed_call(call_key, journal):
                result = await self._send(target.tool_name, arguments, options)
        except (MCPError, ServerAuthenticationError, ServerAuthorizationError) as refused:
            if isinstance(refused, MCPError) and refused.code in _ANSWER_LOST:
                self._lost[call_key] = _lost_answer(refused.error.message)
                raise
            # The server refused the call without creating a task, so nothing ran: the key may be used again.
            record = await journal.get(call_key)
            if record is not None and record.task_id is None:
                await journal.forget(call_key)
            raise
        except (TaskFailedError, TaskCancelledError) as ended:
            await journal.finish(call_key, _ended(ended))
            raise
        except Exception as failed:
            self._lost[call_key] = _lost_answer(f"{type(failed).__name__}: {failed}")
            raise
        finally:
            self._in_flight.discard(call_key)
        record = await journal.get(call_key)
        task_id = record.task_id if record is not None else None
        outcome = CallOutcome("result", task_id=task_id, result=result.model_dump(by_alias=True, mode="json"))
        await journal.finish(call_key, outcome)
        return result

    async def _repeat_call(self, journal: CallJournal, record: CallRecord) -> types.CallToolResult:
        if record.outcome is not None:
            return _replay(record.outcome)
        if record.task_id is None:
            raise CallInDoubtError(record.call_key, self._doubt(record))
        if self.tasks is None:
            raise ClientUsageError(f"call {record.call_key!r} has a task on record; resume it with tasks=True")
        try:
            result = await self.tasks.resume(self.session, record.task_id)
        except (TaskFailedError, TaskCancelledError) as ended:
            await journal.finish(record.call_key, _ended(ended))
            raise
        outcome = CallOutcome("result", task_id=record.task_id, result=result.model_dump(by_alias=True, mode="json"))
        await journal.finish(record.call_key, outcome)
        return result

    def _doubt(self, record: CallRecord) -> str:
        """What is known of a keyed call with nothing on record but its start."""
        if record.call_key in self._in_flight:
            return "it is still in flight in this client; wait for that call instead"
        lost = self._lost.get(record.call_key)
        if lost is not None:
            return lost
        sent = datetime.fromtimestamp(record.started_at, UTC).isoformat(timespec="seconds")
        return (
            f"it was sent at {sent} by another or an earlier client, which recorded nothing after "
            "(it may have stopped, or the call may have failed, before an answer was recorded)"
        )

    def _call_journal(self) -> CallJournal:
        if self._journal is None:
            journal = self.call_journal
            if journal is None:
                journal = default_call_journal_path()
                journal.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # results may be private
            if isinstance(journal, (str, Path)):
                journal = self._opened_journal = SQLiteCallJournal(journal)
            self._journal = journal
        return self._journal

    async def _close_http(self) -> None:
        if self.http_client is not None:
            await self.http_client.aclose()


def _only(group: BaseExceptionGroup[BaseException], exception: BaseException) -> bool:
    """Whether ``group``, nested groups flattened, holds ``exception`` and nothing else."""
    leaves = [group]
    found: list[BaseException] = []
    while leaves:
        inner = leaves.pop()
        for member in inner.exceptions:
            if isinstance(member, BaseExceptionGroup):
                leaves.append(member)
            else:
                found.append(member)
    return len(found) == 1 and found[0] is exception


def _lost_answer(what: str) -> str:
    return f"it was sent, then failed in this client before its answer came back ({what})"


def _identity_of(server: object) -> str | None:
    """The server a ``Client`` target names, for binding keyed calls (``None`` for a Transport object)."""
    if isinstance(server, str):
        return _without_userinfo(server)
    if isinstance(server, (Server, MCPServer)):
        return f"in-process:{server.name}"
    if isinstance(server, StdioServerParameters):
        return f"stdio:{shlex.join([server.command, *server.args])}"
    return None


def _without_userinfo(url: str) -> str:
    """``url`` without credentials in it (the journal must not hold them)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=host))


def _ended(error: TaskFailedError | TaskCancelledError) -> CallOutcome:
    if isinstance(error, TaskFailedError):
        dumped = error.error.model_dump(mode="json") if error.error is not None else None
        return CallOutcome("task_failed", task_id=error.task_id, error=dumped)
    return CallOutcome("task_cancelled", task_id=error.task_id)


def _replay(outcome: CallOutcome) -> types.CallToolResult:
    task_id = outcome.task_id or ""
    if outcome.kind == "task_failed":
        error = types.ErrorData.model_validate(outcome.error) if outcome.error is not None else None
        raise TaskFailedError(task_id, error)
    if outcome.kind == "task_cancelled":
        raise TaskCancelledError(task_id, "task cancelled")
    return types.CallToolResult.model_validate(outcome.result or {"content": []})


def mcp_client(
    target: str | Sequence[str] | StdioServerParameters | Server[Any] | MCPServer[Any],
    *,
    tasks: bool = False,
    task_wait_s: float | None = 30.0,
    auth: str | OAuthClientProvider | None = None,
    headers: Mapping[str, str] | None = None,
    call_journal: CallJournal | str | Path | None = None,
    input_handler: InputHandler | None = None,
    timeout_s: float = 30.0,
    **client_options: Any,
) -> AgentClient:
    """A client for the MCP server at ``target``; use it as ``async with mcp_client(...) as client``.

    Args:
        target: an ``https`` URL (plain ``http`` only on a loopback host), spoken to over Streamable
            HTTP; a command (its argv, or ``StdioServerParameters``) spoken to over stdio; or a
            ``Server`` / ``MCPServer`` object, connected in-process (tests, embedded servers).
        tasks: declare the tasks extension, so a long call resolves its task transparently.
        task_wait_s: how long a call waits for its task before raising ``TaskPendingError``.
        auth: a bearer token, or an OAuth provider (e.g. :func:`~mcp_approval.client.oauth_client`).
        headers: extra HTTP headers (not ``Authorization`` together with ``auth``).
        call_journal: where keyed calls are recorded (a :class:`CallJournal` or a SQLite file path);
            by default :func:`default_call_journal_path`, in the user's data directory.
        input_handler: answers the task's input requests (see :class:`TasksClient`).
        timeout_s: the HTTP timeout of each request.
        client_options: passed to :class:`mcp.Client` (``elicitation_callback``, ``client_info``, ...).

    Raises:
        ClientUsageError: the URL is not https (or loopback http), ``auth`` is given with an
            ``Authorization`` header or for a stdio command.

    Entering the client, and its calls, raise a :class:`~mcp_approval.client.ServerAccessError`
    naming the URL when the server answers ``401`` (:class:`ServerAuthenticationError`) or ``403``
    (:class:`ServerAuthorizationError`) or cannot be reached (:class:`ServerConnectionError`).
    """
    extension = TasksClient(task_wait_s=task_wait_s, input_handler=input_handler) if tasks else None
    extensions = [extension] if extension is not None else []
    common: dict[str, Any] = {"tasks": extension, "call_journal": call_journal, "extensions": extensions}
    if isinstance(target, (Server, MCPServer)):
        if auth is not None or headers:
            raise ClientUsageError("auth= and headers= are for HTTP servers, not an in-process server")
        return AgentClient(target, **common, **client_options)
    if not isinstance(target, str):
        if auth is not None or headers:
            raise ClientUsageError(
                "auth= and headers= are for HTTP servers; a stdio command takes its credentials in env"
            )
        return AgentClient(_stdio(target), **common, **client_options)
    _check_url(target)
    watch = ResponseWatch()
    http = httpx2.AsyncClient(
        headers=_headers(headers, auth), auth=_auth(auth), timeout=timeout_s, event_hooks={"response": [watch]}
    )
    transport = streamable_http_client(target, http_client=http)
    return AgentClient(
        transport,
        **common,
        http_client=http,
        response_watch=watch,
        server_id=_without_userinfo(target),
        **client_options,
    )


def _stdio(command: Sequence[str] | StdioServerParameters) -> StdioServerParameters:
    if isinstance(command, StdioServerParameters):
        return command
    if not command:
        raise ClientUsageError("the stdio command is empty")
    return StdioServerParameters(command=command[0], args=list(command[1:]))


def _check_url(url: str) -> None:
    if is_safe_transport(url):
        return
    raise ClientUsageError(f"server URL {url!r} must be https (plain http only on a loopback host)")


def _headers(headers: Mapping[str, str] | None, auth: str | OAuthClientProvider | None) -> dict[str, str]:
    merged = dict(headers or {})
    has_authorization = any(name.lower() == "authorization" for name in merged)
    if auth is not None and has_authorization:
        raise ClientUsageError("auth= and an Authorization header are two credentials; give one")
    if isinstance(auth, str):
        if not auth:
            raise ClientUsageError("auth= is an empty token")
        merged["Authorization"] = f"Bearer {auth}"
    return merged


def _auth(auth: str | OAuthClientProvider | None) -> OAuthClientProvider | None:
    return auth if isinstance(auth, OAuthClientProvider) else None
