"""``examples/library/server.py``, run as its docs say: approve one payment and deny another over HTTP,
and decide from the terminal with ``mcp-approval review --db``."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_approval.checks.wire import Wire
from mcp_approval.hosts import unused_loopback_port
from mcp_approval.web.throttle import DEFAULT_MAX_FAILURES
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, rewrite_request_arguments
from tests.treasury.helpers import approval_for, assert_approved_executed, assert_denied_not_executed, settled

pytestmark = pytest.mark.anyio
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "library"


class LibraryServer:
    """``python examples/library/server.py --port P --db URL --ledger FILE`` on 127.0.0.1."""

    def __init__(self, tmp_path: Path, *, runner: list[str] | None = None) -> None:
        self.port = unused_loopback_port()
        self.db_url = f"sqlite:///{tmp_path / 'library.db'}"
        self.ledger_path = tmp_path / "payments.jsonl"
        self.log_path = tmp_path / "server.log"
        self.key_file = tmp_path / "binding-keys.toml"
        command = [sys.executable, *(runner or [str(EXAMPLE / "server.py")])]
        command += ["--port", str(self.port), "--db", self.db_url, "--ledger", str(self.ledger_path)]
        command += ["--binding-key-file", str(self.key_file)]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=os.environ.copy())

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_listening(self) -> None:
        limit_s = scaled(30)
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the example exited with {self.process.returncode}: {self.log()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"the example did not listen within {limit_s:.0f}s: {self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def payments_to(self, to: str) -> list[dict[str, Any]]:
        if not self.ledger_path.exists():
            return []
        entries = [json.loads(line) for line in self.ledger_path.read_text().splitlines() if line.strip()]
        return [entry for entry in entries if entry["to"] == to]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(scaled(20))


@pytest.fixture
def example(tmp_path: Path) -> Iterator[LibraryServer]:
    server = LibraryServer(tmp_path)
    try:
        server.wait_listening()
        yield server
    finally:
        server.stop()


def review(*args: str) -> subprocess.CompletedProcess[str]:
    """``mcp-approval review ...`` as a subprocess."""
    command = [sys.executable, "-m", "mcp_approval", "review", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=scaled(60), check=False)


async def test_an_approved_payment_runs_once_and_a_denied_one_never(example: LibraryServer) -> None:
    async with httpx.AsyncClient(base_url=example.base_url, timeout=scaled(20)) as http:
        alice, carol = Wire(http, token="alice-token"), Reviewer(http, "carol-token")
        small = (await alice.call_tool("pay", {"to": "small", "amount": 50})).result
        assert small["isError"] is False
        assert example.payments_to("small") == [{"to": "small", "amount": 50}]

        approved = (await alice.call_tool("pay", {"to": "bob", "amount": 500})).result
        denied = (await alice.call_tool("pay", {"to": "mallory", "amount": 900})).result
        assert approved["resultType"] == "task"
        assert denied["resultType"] == "task"
        assert example.payments_to("bob") == []
        assert example.payments_to("mallory") == []

        bob = await approval_for(carol, "pay", to="bob")
        mallory = await approval_for(carol, "pay", to="mallory")
        assert (await carol.decide(bob["id"], "approve")).status_code == 200
        assert (await carol.decide(mallory["id"], "deny")).status_code == 200

        assert_approved_executed(await settled(alice, approved["taskId"]))
        assert_denied_not_executed(await settled(alice, denied["taskId"]))
    assert example.payments_to("bob") == [{"to": "bob", "amount": 500}]
    assert example.payments_to("mallory") == []


async def test_the_review_cli_lists_and_decides_with_only_the_database(example: LibraryServer) -> None:
    async with httpx.AsyncClient(base_url=example.base_url, timeout=scaled(20)) as http:
        alice = Wire(http, token="alice-token")
        created = (await alice.call_tool("pay", {"to": "carl", "amount": 300})).result
        pending = await approval_for(Reviewer(http, "carol-token"), "pay", to="carl")

        listed = review("list", "--db", example.db_url, "--json")
        assert listed.returncode == 0, listed.stderr
        assert [item["id"] for item in json.loads(listed.stdout)["approvals"]] == [pending["id"]]

        keyless = review("approve", pending["id"], "--db", example.db_url, "--as", "carol", "--role", "approver")
        assert keyless.returncode == 1
        assert "sealed under the server's binding key" in keyless.stderr
        # No template named: the request carries the rules it was submitted under.
        bare = ("--db", example.db_url, "--binding-key-file", str(example.key_file))
        not_an_approver = review("approve", pending["id"], *bare, "--as", "carol", "--role", "payer")
        assert not_an_approver.returncode == 1
        assert "carol lacks the role 'approver'" in not_an_approver.stderr
        assert example.payments_to("carl") == []

        decided = review("approve", pending["id"], *bare, "--as", "carol", "--role", "approver")
        assert decided.returncode == 0, decided.stderr
        assert_approved_executed(await settled(alice, created["taskId"]))
    assert example.payments_to("carl") == [{"to": "carl", "amount": 300}]


@pytest.mark.parametrize(
    ("fence", "name"), [("python", "server.py"), ("cedar", "policy.cedar"), ("json", "entities.json")]
)
def test_the_quickstart_shows_the_example_verbatim(fence: str, name: str) -> None:
    page = (EXAMPLE.parents[1] / "docs" / "quickstart.md").read_text(encoding="utf-8")
    section = page[page.index("## As a library") :]
    blocks = re.findall(rf"^```{fence}\n(.*?)^```$", section, flags=re.MULTILINE | re.DOTALL)
    assert (EXAMPLE / name).read_text(encoding="utf-8") in blocks


async def test_an_edited_request_row_cannot_be_approved_and_nothing_runs(example: LibraryServer) -> None:
    """The library path seals what reviewers see as ``serve`` does: the attack of issue 16, item 1."""
    async with httpx.AsyncClient(base_url=example.base_url, timeout=scaled(20)) as http:
        alice, carol = Wire(http, token="alice-token"), Reviewer(http, "carol-token")
        created = (await alice.call_tool("pay", {"to": "attacker", "amount": 990})).result
        approval = await approval_for(carol, "pay", to="attacker")
        assert approval["integrity_failure"] is None
        database = Path(example.db_url.removeprefix("sqlite:///"))
        rewrite_request_arguments(database, approval["id"], to="payroll", amount=260)

        shown = (await http.get(f"/approvals/{approval['id']}", headers=carol.headers)).json()
        assert shown["integrity_failure"] == "the stored request does not match what was submitted"
        assert shown["arguments"] == {}
        refused = await carol.decide(approval["id"], "approve")
        assert refused.status_code == 409, refused.text
        assert "cannot be approved" in refused.json()["detail"]

        assert (await carol.decide(approval["id"], "deny")).status_code == 200
        assert_denied_not_executed(await settled(alice, created["taskId"]))
    assert example.payments_to("attacker") == []
    assert example.payments_to("payroll") == []


#: The example's server under uvicorn's defaults, which honour X-Forwarded-For from loopback.
PLAIN_UVICORN = f"""
import sys, argparse
from pathlib import Path
import uvicorn
sys.path.insert(0, {str(EXAMPLE)!r})
from server import build, new_key_file
parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int)
parser.add_argument("--db")
parser.add_argument("--ledger", type=Path)
parser.add_argument("--binding-key-file", type=Path)
args = parser.parse_args()
keys = new_key_file(args.binding_key_file)
server, approvals = build(args.db, f"http://127.0.0.1:{{args.port}}", args.ledger, keys)
uvicorn.run(approvals.http_app(server), host="127.0.0.1", port=args.port)
"""

#: The example's server run with approvals.run behind a proxy on 127.0.0.1 that it trusts.
BEHIND_A_PROXY = PLAIN_UVICORN.replace(
    'uvicorn.run(approvals.http_app(server), host="127.0.0.1", port=args.port)',
    'approvals.trusted_proxies = ("127.0.0.1",)\napprovals.run(server, host="127.0.0.1", port=args.port)',
)
WRONG = {"authorization": "Bearer not-a-token"}


def _rotating_failures(base_url: str, path: str) -> list[int]:
    """Wrong tokens, each naming a fresh forwarded address, one more than the limit allows."""
    with httpx.Client(base_url=base_url, timeout=scaled(20)) as client:
        return [
            client.get(path, headers={**WRONG, "x-forwarded-for": f"203.0.113.{n}"}).status_code
            for n in range(DEFAULT_MAX_FAILURES + 1)
        ]


def _named_address_is_not_locked_out(base_url: str) -> None:
    """Failures "from" 127.0.0.1 named in the header do not lock out the real 127.0.0.1."""
    with httpx.Client(base_url=base_url, timeout=scaled(20)) as client:
        for _ in range(DEFAULT_MAX_FAILURES + 1):
            client.get("/approvals", headers={**WRONG, "x-forwarded-for": "127.0.0.1"})
        own = client.get("/approvals", headers={"authorization": "Bearer carol-token"})
    assert own.status_code == 200, own.text


@pytest.fixture(params=["approvals.run", "plain uvicorn.run(http_app)"])
def any_runner(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LibraryServer]:
    runner = None if request.param == "approvals.run" else ["-c", PLAIN_UVICORN]
    server = LibraryServer(tmp_path, runner=runner)
    try:
        server.wait_listening()
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("path", ["/approvals", "/mcp"])
def test_a_rotating_forwarded_for_does_not_escape_the_failed_token_limit(any_runner: LibraryServer, path: str) -> None:
    statuses = _rotating_failures(any_runner.base_url, path)
    assert statuses[:-1] == [401] * DEFAULT_MAX_FAILURES, statuses
    assert statuses[-1] == 429, "a rotated X-Forwarded-For escaped the failed-token limit"


def test_an_address_named_in_forwarded_for_is_not_locked_out(any_runner: LibraryServer) -> None:
    _named_address_is_not_locked_out(any_runner.base_url)


def test_behind_a_trusted_proxy_each_forwarded_client_has_its_own_limit(tmp_path: Path) -> None:
    server = LibraryServer(tmp_path, runner=["-c", BEHIND_A_PROXY])
    try:
        server.wait_listening()
        statuses = _rotating_failures(server.base_url, "/approvals")
        with httpx.Client(base_url=server.base_url, timeout=scaled(20)) as client:
            repeated = [
                client.get("/approvals", headers={**WRONG, "x-forwarded-for": "198.51.100.7"}).status_code
                for _ in range(DEFAULT_MAX_FAILURES + 1)
            ]
    finally:
        server.stop()
    assert statuses == [401] * (DEFAULT_MAX_FAILURES + 1)
    assert repeated[-1] == 429
