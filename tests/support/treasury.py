"""The treasury example deployment as a real ``mcp-approval serve`` subprocess on 127.0.0.1.

Each server gets a private copy of ``examples/treasury`` (policy, entities, tools, ledger) with
the configuration overrides a test needs, so tests never share a ledger or a database.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import tomllib
from pathlib import Path
from typing import Any

import httpx

from mcp_approval.checks.wire import Reply, Wire
from mcp_approval.hosts import unused_loopback_port
from tests.support import forkserver
from tests.support.store_leg import postgres_leg, store_url_for
from tests.support.timing import scaled

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "treasury"

#: Intervals that keep tests fast: polls every 50 ms, a lost worker noticed after 1 s, an intent
#: without its task reconciled after 1 s (a shorter grace lets reconciliation withdraw calls that are
#: only slow on a loaded host, which then answer -32603 instead of reaching a crash point). The lease
#: and the grace are scaled like the suite's wait limits: on a busy machine a worker that is alive
#: but starved of CPU must not pass for lost (another worker would then settle its running call as
#: outcome-unknown).
FAST = {
    "tasks": {"poll_interval_s": 0.05, "threshold_s": 5.0},
    "approval": {"poll_interval_s": 0.05, "lease_s": scaled(1.0), "intent_grace_s": scaled(1.0)},
}


def deployment_dir(
    tmp_path: Path, overrides: dict[str, dict[str, Any]] | None = None, *, name: str = "treasury"
) -> Path:
    """A private copy of the example with ``overrides`` merged into its config (section → values)."""
    target = tmp_path / name
    if not target.exists():
        shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns("*.db*", "ledger.jsonl", "__pycache__"))
    config = tomllib.loads((EXAMPLE / "config.toml").read_text())
    for section in {**FAST, **(overrides or {})}:
        merged = dict(FAST.get(section, {}))
        merged.update((overrides or {}).get(section, {}))
        if isinstance(config.get(section), dict):
            config[section].update(merged)
        else:
            config[section] = merged
    if postgres_leg() and "url" not in (overrides or {}).get("store", {}):
        config.setdefault("store", {})["url"] = store_url_for(target)
    (target / "config.toml").write_text(to_toml(config))
    return target


def to_toml(document: dict[str, Any]) -> str:
    """Serialize the subset of TOML the deployment file uses."""
    lines: list[str] = []
    for key, value in document.items():
        if not isinstance(value, (dict, list)) or (isinstance(value, list) and not _is_tables(value)):
            lines.append(f"{key} = {_value(value)}")
    for key, value in document.items():
        if isinstance(value, dict):
            _table(lines, key, value)
        elif isinstance(value, list) and _is_tables(value):
            for item in value:
                lines.append(f"\n[[{key}]]")
                lines.extend(f"{k} = {_value(v)}" for k, v in item.items())
    return "\n".join(lines) + "\n"


def _table(lines: list[str], name: str, table: dict[str, Any]) -> None:
    scalars = {k: v for k, v in table.items() if not (isinstance(v, dict) and _is_section(v))}
    lines.append(f"\n[{name}]")
    lines.extend(f"{k} = {_value(v)}" for k, v in scalars.items())
    for key, value in table.items():
        if isinstance(value, dict) and _is_section(value):
            _table(lines, f"{name}.{key}", value)


def _is_section(value: dict[str, Any]) -> bool:
    # Nested tables that hold only scalars and are not settings maps are written as sections.
    return any(isinstance(v, (int, float, bool)) for v in value.values()) and not all(
        isinstance(v, str) for v in value.values()
    )


def _is_tables(value: list[Any]) -> bool:
    return bool(value) and all(isinstance(item, dict) for item in value)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {value!r} as TOML")


class TreasuryServer:
    """``python -m mcp_approval serve --config <copy>/config.toml`` on a free port."""

    def __init__(self, directory: Path, *, db_url: str | None = None, env: dict[str, str] | None = None) -> None:
        self.directory = directory
        self.db_url = db_url
        self.env = env or {}
        self.port = unused_loopback_port()
        self.process: subprocess.Popen[bytes] | forkserver.ForkedProcess | None = None
        self.log_path = directory / "server.log"
        #: What the test saw of the server (e.g. how a request ended), shown if it is found hung.
        self.notes: list[str] = []

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, *, env: dict[str, str] | None = None, timeout_s: float | None = None) -> TreasuryServer:
        """Start the server and wait until it listens (up to ``timeout_s``; by default ``scaled(30)``)."""
        # Through dump_on_signal, so a hung server can be asked where it waits (see wait_exit).
        arguments = ["mcp_approval", "serve", "--config", str(self.directory / "config.toml")]
        arguments += ["--port", str(self.port)]
        if self.db_url:
            arguments += ["--db", self.db_url]
        environment = {**os.environ, **self.env, **(env or {})}
        self.process = self.launch(arguments, environment)
        limit_s = scaled(30) if timeout_s is None else timeout_s
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}: {self.log()[-3000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"server did not listen within {limit_s:.0f}s: {self.log()[-3000:]}")

    def launch(
        self, arguments: list[str], environment: dict[str, str]
    ) -> subprocess.Popen[bytes] | forkserver.ForkedProcess:
        """``python -m`` ``arguments`` (forked from the warm process of this code; see ``forkserver``)."""
        return forkserver.start_module(arguments, env=environment, log_path=self.log_path)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        if self.process is not None:
            self.process.wait(scaled(10))

    def wait_exit(self, timeout_s: float | None = None) -> int:
        """Wait for the process to end by itself (e.g. at a crash point).

        A process still running after ``timeout_s`` (by default ``scaled(30)``) is killed, and the
        failure carries its log.
        """
        assert self.process is not None
        limit_s = scaled(30) if timeout_s is None else timeout_s
        try:
            return self.process.wait(limit_s)
        except subprocess.TimeoutExpired:
            self.dump_stacks()
            self.kill()
            seen = "".join(f"\n  {note}" for note in self.notes) or " nothing"
            message = f"server still running after {limit_s:.0f}s; the test saw:{seen}\nits log:\n{self.log()[-12000:]}"
            raise AssertionError(message) from None

    def dump_stacks(self) -> None:
        """Have a live server write its threads' and asyncio tasks' stacks to its log."""
        assert self.process is not None
        for signum in (signal.SIGUSR1, signal.SIGUSR2):
            self.process.send_signal(signum)
        # The dumps are written by the server itself; give it a moment (bounded) before it is killed.
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(scaled(3))

    def ledger(self) -> list[dict[str, Any]]:
        """The executed operations, read from the ledger file (works while the server is down)."""
        path = self.directory / "ledger.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def deployment_store(directory: Path) -> str:
    """The store URL the deployment in ``directory`` uses (SQLite, or PostgreSQL in the store leg)."""
    from mcp_approval.config import load_config

    return load_config(directory / "config.toml").store_url()


def store_rows(store: str | Path, statement: str, parameters: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
    """Run one SQL ``statement`` on a store (a URL, or a SQLite file) in its own transaction; its rows.

    From any thread or event loop: the store is opened in a loop of its own and closed after.
    """
    from sqlalchemy import text

    from mcp_approval.storage import open_database

    url = store if isinstance(store, str) else f"sqlite:///{store}"

    def run(conn: Any) -> list[tuple[Any, ...]]:
        result = conn.execute(text(statement), parameters or {})
        return [tuple(row) for row in result] if result.returns_rows else []

    async def once() -> list[tuple[Any, ...]]:
        database = open_database(url)
        try:
            return await database.write(run)
        finally:
            await database.close()

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, once()).result(timeout=scaled(60))


def rewrite_request_arguments(store: str | Path, approval_id: str, **arguments: object) -> None:
    """Edit a stored approval request's arguments, as an attacker with write access to the database could."""
    ((body_json,),) = store_rows(
        store, "SELECT body_json FROM approval_requests WHERE request_id = :id", {"id": approval_id}
    )
    body = json.loads(body_json)
    body["arguments"] = {**body["arguments"], **arguments}
    update = "UPDATE approval_requests SET body_json = :body WHERE request_id = :id"
    store_rows(store, update, {"body": json.dumps(body), "id": approval_id})


class Reviewer:
    """The reviewer HTTP API as one reviewer."""

    def __init__(self, http: httpx.AsyncClient, token: str) -> None:
        self.http = http
        self.headers = {"authorization": f"Bearer {token}"}

    async def pending(self) -> list[dict[str, Any]]:
        return await self.listed("pending")

    async def listed(self, status: str) -> list[dict[str, Any]]:
        """The requests this reviewer is shown in the ``status`` listing (``pending`` or ``decided``)."""
        response = await self.http.get("/approvals", params={"status": status}, headers=self.headers)
        assert response.status_code == 200, response.text
        return list(response.json()["approvals"])

    async def decide(self, approval_id: str, decision: str, comment: str | None = None) -> httpx.Response:
        body: dict[str, Any] = {"decision": decision}
        if comment is not None:
            body["comment"] = comment
        return await self.http.post(f"/approvals/{approval_id}/decide", json=body, headers=self.headers)


def principals(http: httpx.AsyncClient) -> dict[str, Wire]:
    """A raw JSON-RPC wire per treasury principal."""
    return {name: Wire(http, token=f"{name}-token") for name in ("alice", "bob", "carol", "dave", "erin")}


async def call_until_crash(server: TreasuryServer, wire: Wire, tool: str, arguments: dict[str, Any]) -> Reply | None:
    """Call ``tool`` on a server armed to crash: the reply, or ``None`` when the connection died.

    A timeout is neither: the server hung, and the failure carries its log.
    """
    try:
        return await wire.call_tool(tool, arguments)
    except httpx.TimeoutException:
        server.dump_stacks()
        raise AssertionError(f"the server neither answered nor died; its log:\n{server.log()[-12000:]}") from None
    except httpx.TransportError as exc:
        server.notes.append(f"{tool}: {type(exc).__name__}: {exc}")
        return None
