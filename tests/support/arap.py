"""The treasury deployment over AuthZEN + ARAP: ``mcp-approval arap-server`` beside ``serve``.

Both are real subprocesses on 127.0.0.1 sharing one private copy of ``examples/treasury``:
``arap-server.toml`` (the reference PDP + Access Request Service, reviewers at its
``/approvals``) and ``config.toml`` written from ``config-arap.toml`` (``serve`` with
``HttpPDP`` and the ARAP backend pointed at it, callbacks back to ``serve``).

Each keeps a SQLite file in that folder (``treasury-arap.db``, ``arap-server.db``), or a
PostgreSQL database of its own in the suite's PostgreSQL leg; tests read and write them through
:func:`serve_store` and :func:`ars_store`, whichever they are.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_approval.hosts import unused_loopback_port
from tests.support import forkserver
from tests.support.fault_proxy import FaultProxy
from tests.support.store_leg import postgres_leg, store_url_for
from tests.support.timing import scaled
from tests.support.treasury import EXAMPLE, FAST, TreasuryServer, deployment_store, store_rows, to_toml

#: Test pacing for the ARS: the shortest Retry-After it allows, auto-resolvers answered at once.
ARS_FAST: dict[str, Any] = {"retry_after_s": 1, "sync_wait_s": 1.0}
#: Test pacing for the PEP: polls back off from 50 ms (the ARS's Retry-After still wins); its
#: requests to the ARS wait as long as a busy machine needs.
ARAP_FAST: dict[str, Any] = {"poll_initial_s": 0.05, "timeout_s": scaled(10.0)}
ARS_CLIENT_TOKEN = "treasury-mcp-client-token-dev"


class ArapServerProcess:
    """``python -m mcp_approval arap-server --config <dir>/arap-server.toml`` on a fixed free port."""

    def __init__(self, directory: Path, *, port: int | None = None) -> None:
        self.directory = directory
        self.port = port or unused_loopback_port()
        self.process: subprocess.Popen[bytes] | forkserver.ForkedProcess | None = None
        self.log_path = directory / "arap-server.log"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, *, timeout_s: float | None = None) -> ArapServerProcess:
        """Start the server and wait until it says it listens (up to ``timeout_s``; by default ``scaled(30)``)."""
        config = str(self.directory / "arap-server.toml")
        arguments = ["mcp_approval", "arap-server", "--config", config, "--port", str(self.port)]
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        self.process = forkserver.start_module(arguments, env=dict(os.environ), log_path=self.log_path)
        limit_s = scaled(30) if timeout_s is None else timeout_s
        deadline = time.monotonic() + limit_s
        announced = "arap-server listening on "
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"arap-server exited with {self.process.returncode}: {self.log()[-3000:]}")
            if announced in self.log()[offset:]:
                return self
            time.sleep(0.05)
        raise RuntimeError(f"arap-server did not listen within {limit_s:.0f}s: {self.log()[-3000:]}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        if self.process is not None:
            self.process.wait(scaled(10))


@dataclass
class ArapDeployment:
    """``serve`` (the PEP) and ``arap-server`` (PDP + ARS) of one private treasury copy."""

    directory: Path
    serve: TreasuryServer
    ars: ArapServerProcess
    #: In front of the arap-server when asked for: the URL every party (PEP, PDP metadata) uses.
    proxy: FaultProxy | None = None

    @property
    def ars_url(self) -> str:
        """The PDP identifier / ARS base URL as published (the proxy's, when there is one)."""
        return self.proxy.base_url if self.proxy is not None else self.ars.base_url

    def start(self) -> ArapDeployment:
        self.ars.start()
        self.serve.start()
        return self

    def kill(self) -> None:
        self.serve.kill()
        self.ars.kill()
        if self.proxy is not None:
            self.proxy.stop()


def _merge(config: dict[str, Any], overrides: dict[str, dict[str, Any]]) -> dict[str, Any]:
    for section, values in overrides.items():
        if isinstance(config.get(section), dict):
            config[section].update(values)
        else:
            config[section] = dict(values)
    return config


def arap_deployment(
    tmp_path: Path,
    overrides: dict[str, dict[str, Any]] | None = None,
    *,
    ars_overrides: dict[str, dict[str, Any]] | None = None,
    pdp_url: str | None = None,
    proxy: bool = False,
    name: str = "treasury-arap",
) -> ArapDeployment:
    """A private copy of the example wired for ARAP (not started).

    ``overrides`` change ``serve``'s config (section → values), ``ars_overrides`` the
    arap-server's; ``pdp_url`` points ``serve`` somewhere else than the arap-server (e.g. a
    fault-injecting proxy in front of it). With ``proxy`` a :class:`FaultProxy` (started here) fronts
    the arap-server, which then publishes the proxy's URL as its identifier, so every exchange
    (discovery, evaluation, submission, status, cancel) crosses it.
    """
    import shutil

    target = tmp_path / name
    if not target.exists():
        shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns("*.db*", "ledger.jsonl", "__pycache__"))
    serve = TreasuryServer(target)
    ars = ArapServerProcess(target)
    front = FaultProxy(ars.base_url).start() if proxy else None
    public = front.base_url if front is not None else ars.base_url
    ars_config = tomllib.loads((EXAMPLE / "arap-server.toml").read_text())
    ars_config["store"] = {"url": _ars_store_url(target)}
    published = {"base_url": public} if front is not None else {}
    _merge(ars_config, {"arap": {**ARS_FAST, **published, "callback_allowlist": [serve.base_url]}})
    _merge(ars_config, ars_overrides or {})
    (target / "arap-server.toml").write_text(to_toml(ars_config))
    config = tomllib.loads((EXAMPLE / "config-arap.toml").read_text())
    _merge(config, FAST)
    _merge(
        config,
        {
            "policy": {"pdp_url": pdp_url or public},
            "arap": {**ARAP_FAST, "callback_url": serve.base_url + "/approvals/callback"},
        },
    )
    if postgres_leg():
        config["store"] = {"url": store_url_for(target)}
    _merge(config, overrides or {})
    (target / "config.toml").write_text(to_toml(config))
    return ArapDeployment(target, serve, ars, front)


def _ars_store_url(target: Path) -> str:
    if not postgres_leg():
        return f"sqlite:///{target / 'arap-server.db'}"
    folder = target / "arap-server-store"  # a database of its own, apart from serve's
    folder.mkdir(exist_ok=True)
    return store_url_for(folder)


def serve_store(directory: Path) -> str:
    """The store URL of the ARAP deployment's ``serve`` (the PEP) in ``directory``."""
    return deployment_store(directory)


def ars_store(directory: Path) -> str:
    """The store URL of the deployment's ``arap-server`` in ``directory``."""
    return str(tomllib.loads((directory / "arap-server.toml").read_text())["store"]["url"])


def _stored_handle(directory: Path, task_id: str) -> tuple[bool, dict[str, str] | None]:
    """Whether ``serve`` has a workflow for the task, and the ARAP handle it stored for it (if any yet)."""
    import json

    query = "SELECT handle FROM approval_workflows WHERE task_id = :id"
    rows = store_rows(serve_store(directory), query, {"id": task_id})
    if not rows:
        return False, None
    return True, (json.loads(rows[0][0]) if rows[0][0] else None)


def handle_of(directory: Path, task_id: str, *, timeout_s: float | None = None) -> dict[str, str]:
    """The ARAP handle ``serve`` stored for an MCP task (``{id, status_endpoint}``), read from its database.

    Waits (up to ``timeout_s``; by default ``scaled(15)``) for it: the Access Request Service shows
    a request as soon as it is submitted, and ``serve`` stores the handle only when the submission's
    answer reaches it.
    """
    import time

    limit_s = scaled(15) if timeout_s is None else timeout_s
    deadline = time.monotonic() + limit_s
    exists, handle = _stored_handle(directory, task_id)
    while not handle and time.monotonic() < deadline:
        time.sleep(0.02)  # polling the database for the state, bounded by the deadline
        exists, handle = _stored_handle(directory, task_id)
    assert exists, f"no workflow for task {task_id}"
    assert handle, f"no handle stored for task {task_id} within {limit_s:.0f}s"
    return handle


def stored_handle_id(directory: Path, task_id: str) -> str | None:
    """The id of the ARAP handle stored for an MCP task, or None while its current request has none yet."""
    _, handle = _stored_handle(directory, task_id)
    return handle["id"] if handle else None


def ars_view(directory: Path, task_id: str) -> dict[str, Any]:
    """The ARS's Task Handle response for an MCP task, read as the PEP reads it (bearer, status endpoint)."""
    import httpx

    endpoint = handle_of(directory, task_id)["status_endpoint"]
    response = httpx.get(endpoint, headers={"authorization": f"Bearer {ARS_CLIENT_TOKEN}"}, timeout=scaled(10))
    assert response.status_code == 200, response.text
    document: dict[str, Any] = response.json()
    return document
