"""What the examples in this folder share: the command line, the servers, the run's state directory, the scripted model.

Every example takes ``--url URL --token TOKEN --state DIR [--scripted] start "PROMPT"`` or
``... resume``. ``--url`` may be given several times as ``NAME=URL``: an agent over several
servers, each named ``NAME`` and its tools prefixed ``NAME_`` (``a_wire_transfer``), with a call
journal of its own. ``DIR`` holds the call journals (``calls.sqlite3``, or ``calls-NAME.sqlite3``),
the framework's own saved state and, once the run finished, ``finished.json`` with the tools'
result texts. ``--state-key FILE`` (a file of at least 32 random bytes, kept outside ``DIR``)
seals the call journals' rows, so an edit of both a journal and the saved run is refused too.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_approval.agents import ApprovalServers, ApprovalTools
from mcp_approval.client import CallJournalIntegrityError, ClientUsageError, SQLiteCallJournal, mcp_client

__all__ = [
    "Options",
    "Server",
    "connect",
    "finished",
    "finished_before",
    "options",
    "record_finished",
    "refused",
    "report",
    "scripted_calls",
]


@dataclass(frozen=True)
class Server:
    """One ``--url``: the server's name (empty for a lone unnamed URL), its URL and its call journal."""

    name: str
    url: str

    @property
    def prefix(self) -> str:
        """What the server's tool names start with, as the model sees them."""
        return f"{self.name}_" if self.name else ""

    @property
    def journal(self) -> str:
        """The file name of this server's call journal in the state directory."""
        return f"calls-{self.name}.sqlite3" if self.name else "calls.sqlite3"


@dataclass(frozen=True)
class Options:
    """The parsed command line."""

    servers: list[Server]
    token: str
    state: Path
    state_key: bytes | None
    scripted: bool
    command: str
    prompt: str


def _server(text: str) -> Server:
    name, sep, url = text.partition("=")
    if sep and re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", name):
        return Server(name, url)
    return Server("", text)


def options(description: str) -> Options:
    """Parse the command line shared by the examples; the state directory is created."""
    parser = argparse.ArgumentParser(description=description)
    where = "the MCP server's URL (…/mcp), or NAME=URL (repeatable: several servers)"
    parser.add_argument("--url", required=True, action="append", type=_server, help=where)
    parser.add_argument("--token", required=True, help="the bearer token the agent calls with")
    parser.add_argument("--state", required=True, type=Path, help="where the paused run is kept")
    parser.add_argument("--state-key", type=Path, help="a key file (32+ bytes, not in --state) sealing the journals")
    parser.add_argument("--scripted", action="store_true", help="the framework's test model instead of an LLM")
    parser.add_argument("command", choices=["start", "resume"])
    parser.add_argument("prompt", nargs="?", default="")
    parsed = parser.parse_args()
    if parsed.command == "start" and not parsed.prompt:
        parser.error("start needs a PROMPT")
    servers: list[Server] = parsed.url
    if len(servers) > 1 and not all(server.name for server in servers):
        parser.error("several servers need a name each: --url NAME=URL")
    parsed.state.mkdir(parents=True, exist_ok=True)
    key = parsed.state_key.read_bytes() if parsed.state_key is not None else None
    return Options(servers, parsed.token, parsed.state, key, parsed.scripted, parsed.command, parsed.prompt)


@asynccontextmanager
async def connect(opts: Options) -> AsyncIterator[ApprovalServers]:
    """A client per server (tasks, the bearer token, its own call journal), as one :class:`ApprovalServers`."""
    async with AsyncExitStack() as stack:
        gates = []
        for server in opts.servers:
            journal = SQLiteCallJournal(opts.state / server.journal, key=opts.state_key)
            stack.callback(journal.close)
            client = await stack.enter_async_context(
                mcp_client(server.url, tasks=True, auth=opts.token, call_journal=journal)
            )
            gates.append(ApprovalTools(client, name=server.name or None, prefix=server.prefix))
        yield ApprovalServers(*gates)


def refused(main: Callable[[], Awaitable[int]]) -> Callable[[], Awaitable[int]]:
    """``main``, with a refused resume (a server not given, a call not in or edited in a journal): one line, exit 2."""

    async def run() -> int:
        try:
            return await main()
        except (ClientUsageError, CallJournalIntegrityError) as error:
            print(f"refused: {error}", file=sys.stderr)
            return 2

    return run


# "send AMOUNT to ACCOUNT", then "on SERVER" when the agent has several.
_CLAUSE = re.compile(
    r"\bsend\s+\$?(\d[\d,]*(?:\.\d+)?)\s+to\s+([A-Za-z0-9_.-]+)(?:\s+on\s+([A-Za-z][A-Za-z0-9]*))?", re.IGNORECASE
)


def scripted_calls(prompt: str) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls the scripted model makes for ``prompt``, in one turn.

    "Send 30000 to acme" → ``wire_transfer``; "send 5000 to acme on a and send 5000 to bolt on b" →
    ``a_wire_transfer`` and ``b_wire_transfer``.
    """
    calls = [
        (f"{server}_wire_transfer" if server else "wire_transfer", {"to": to, "amount": float(amount.replace(",", ""))})
        for amount, to, server in _CLAUSE.findall(prompt)
    ]
    if not calls:
        raise SystemExit(f"the scripted model wants 'send AMOUNT to ACCOUNT [on SERVER]', got {prompt!r}")
    return calls


def report(results: list[str]) -> str:
    """The scripted model's last message: what each tool returned."""
    return "The tool answered: " + " | ".join(results)


def finished(state: Path) -> str | None:
    """The result text of a run that already finished, if it did."""
    path = state / "finished.json"
    return json.loads(path.read_text())["result"] if path.exists() else None


def finished_before(opts: Options, saved: Path) -> bool:
    """For ``resume``: whether the run finished before (its recorded result is printed; nothing is called).

    Exits when ``saved`` (the framework's saved state) is missing: nothing was paused in ``opts.state``.
    """
    if opts.command != "resume":
        return False
    done = finished(opts.state)
    if done is not None:
        print(done)
        return True
    if not saved.exists():
        raise SystemExit(f"no paused run in {opts.state}")
    return False


def record_finished(state: Path, result: str, messages: Any) -> None:
    """Keep the finished run's result text and the model's messages (``finished.json``)."""
    (state / "finished.json").write_text(json.dumps({"result": result, "messages": messages}, indent=2))
