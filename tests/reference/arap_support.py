"""The reference arap-server for tests: in-process (uvicorn in a thread) or as a real subprocess.

Every server gets a private copy of the treasury example's policy, entities, dev signing key and
``arap-server.toml`` (with the overrides a test needs). Requests are real HTTP on 127.0.0.1.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import tomllib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from starlette.routing import BaseRoute

from mcp_approval.clock import Clock
from mcp_approval.reference.config import load_arap_config
from mcp_approval.reference.server import ArapServer, build_arap_server
from tests.support.oauth_server import bound_socket, origin, serve_app
from tests.support.timing import scaled
from tests.support.treasury import to_toml

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "treasury"
CLIENT_TOKEN = "treasury-mcp-client-token-dev"
OTHER_CLIENT_TOKEN = "other-pep-client-token-0001"
PROBLEM_JSON = "application/problem+json"
ERROR = "urn:openid:authzen:access-request:error:"
FILES = ("policy.cedar", "entities.json", "arap-dev-signing-key.pem", "arap-server.toml")


def arap_dir(tmp_path: Path, overrides: dict[str, Any] | None = None, *, name: str = "arap") -> Path:
    """A private copy of the example with ``overrides`` merged (section → values) into ``[arap]`` etc."""
    target = tmp_path / name
    target.mkdir(parents=True, exist_ok=True)
    for file in FILES:
        shutil.copy(EXAMPLE / file, target / file)
    config = tomllib.loads((EXAMPLE / "arap-server.toml").read_text())
    config["arap"]["clients"].append({"id": "other-pep", "token": OTHER_CLIENT_TOKEN})
    config["arap"]["retry_after_s"] = 1
    config["arap"]["sync_wait_s"] = 5.0
    for section, values in (overrides or {}).items():
        if isinstance(values, dict) and isinstance(config.get(section), dict):
            config[section].update(values)
            config[section] = {k: v for k, v in config[section].items() if v is not None}  # None: unset
        else:
            config[section] = values
    (target / "arap-server.toml").write_text(to_toml(config))
    return target


def transfer(amount: float = 50_000, who: str = "alice", to: str = "acme") -> dict[str, Any]:
    """An evaluation request for a treasury ``wire_transfer`` call."""
    return {
        "subject": {"type": "user", "id": who},
        "action": {"name": "tools/call"},
        "resource": {"type": "tool", "id": "wire_transfer"},
        "context": {"arguments": {"amount": amount, "to": to}},
    }


def tool_call(tool: str, arguments: dict[str, Any], who: str = "alice") -> dict[str, Any]:
    """An evaluation request for any treasury tool."""
    return {
        "subject": {"type": "user", "id": who},
        "action": {"name": "tools/call"},
        "resource": {"type": "tool", "id": tool},
        "context": {"arguments": arguments},
    }


def submission(request: dict[str, Any], decision: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The Access Request body a PEP builds from a request and its requestable denial."""
    context = decision["context"]
    hint = context["access_request"]
    denial = {"expires_at": hint["expires_at"]}
    for name in ("evaluation_id", "evaluated_at", "reason"):
        if name in context:
            denial[name] = context[name]
    for name in ("template", "binding_token"):
        if name in hint:
            denial[name] = hint[name]
    return {**request, "denial": denial, **extra}


@dataclass
class Harness:
    """One running arap-server and a client for it."""

    base_url: str
    http: httpx.Client
    server: ArapServer | None = None

    def evaluate(self, body: dict[str, Any]) -> dict[str, Any]:
        response = self.http.post("/access/v1/evaluation", json=body)
        assert response.status_code == 200, response.text
        return dict(response.json())

    def submit(
        self, body: dict[str, Any], *, key: str | None = "key-1", token: str | None = CLIENT_TOKEN
    ) -> httpx.Response:
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        if key is not None:
            headers["Idempotency-Key"] = key
        return self.http.post("/access/v1/requests", json=body, headers=headers)

    def status(self, url: str, token: str = CLIENT_TOKEN) -> httpx.Response:
        return self.http.get(url, headers={"Authorization": f"Bearer {token}"})

    def request_for(self, request: dict[str, Any], *, key: str = "key-1") -> tuple[dict[str, Any], httpx.Response]:
        """Evaluate ``request`` (a requestable denial) and submit it."""
        decision = self.evaluate(request)
        assert "access_request" in decision.get("context", {}), decision
        return decision, self.submit(submission(request, decision), key=key)

    def pending_ids(self, reviewer: str = "carol") -> list[str]:
        response = self.http.get("/approvals", headers={"Authorization": f"Bearer {reviewer}-token"})
        assert response.status_code == 200, response.text
        return [item["id"] for item in response.json()["approvals"]]

    def decide(self, request_id: str, reviewer: str, decision: str = "approve") -> httpx.Response:
        return self.http.post(
            f"/approvals/{request_id}/decide",
            json={"decision": decision},
            headers={"Authorization": f"Bearer {reviewer}-token"},
        )

    def approve_only_pending(self, reviewer: str = "carol") -> str:
        (request_id,) = self.pending_ids(reviewer)
        response = self.decide(request_id, reviewer)
        assert response.status_code == 200, response.text
        return request_id


@contextmanager
def running_arap(
    directory: Path, *, clock: Clock | None = None, store_url: str | None = None, extra_routes: Sequence[BaseRoute] = ()
) -> Iterator[Harness]:
    """The arap-server of ``directory`` in this process (uvicorn in a thread)."""
    config = load_arap_config(directory / "arap-server.toml")
    sock = bound_socket()
    server = build_arap_server(
        config, store_url=store_url, base_url=origin(sock), clock=clock, extra_routes=extra_routes
    )
    with serve_app(server.app, sock) as url, httpx.Client(base_url=url, timeout=scaled(15)) as http:
        yield Harness(url, http, server)


class ArapProcess:
    """``python -m mcp_approval arap-server --port 0`` as a subprocess; the URL comes from its startup line."""

    def __init__(
        self, config: Path, log_dir: Path, *, db_url: str | None = None, port: int = 0, extra_args: Sequence[str] = ()
    ) -> None:
        self.config = config
        self.extra_args = list(extra_args)
        self.db_url = db_url
        self.port = port
        self.process: subprocess.Popen[str] | None = None
        self.base_url = ""
        self.log_path = log_dir / "arap-server.log"

    def start(self, timeout_s: float | None = None) -> ArapProcess:
        """Start the server and read the line it prints once it listens (up to ``timeout_s``; ``scaled(30)``)."""
        command = [sys.executable, "-m", "mcp_approval", "arap-server", "--config"]
        command += [str(self.config), "--port", str(self.port)]
        if self.db_url:
            command += ["--db", self.db_url]
        command += self.extra_args
        log = self.log_path.open("a")
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True, env=dict(os.environ))
        assert self.process.stdout is not None
        limit_s = scaled(30) if timeout_s is None else timeout_s
        ready, _, _ = select.select([self.process.stdout], [], [], limit_s)  # the startup line, or EOF
        line = self.process.stdout.readline() if ready else ""
        if not line.startswith("arap-server listening on "):
            self.kill()
            raise RuntimeError(f"arap-server did not start: {line!r}\n{self.log()[-3000:]}")
        self.base_url = line.removeprefix("arap-server listening on ").strip()
        self.port = int(self.base_url.rsplit(":", 1)[1])
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        if self.process is not None:
            self.process.wait(scaled(10))
