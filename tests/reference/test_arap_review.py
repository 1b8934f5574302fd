"""Reviewers, callbacks and the https rule of arap-server, over real HTTP on 127.0.0.1.

Reviewers use the local backend's shared reviewer API (``/approvals``), console (``/console``)
and ``mcp-approval review`` CLI against the arap-server's store.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mcp_approval.approval.binding import arguments_digest
from mcp_approval.backends.callbacks import verify_callback
from mcp_approval.reference.arap_callbacks import callback_problem
from mcp_approval.reference.config import load_arap_config
from mcp_approval.reference.server import build_arap_server, check_base_url
from mcp_approval.storage import AuditLog, open_database
from tests.reference.arap_support import Harness, arap_dir, running_arap, submission, tool_call, transfer
from tests.support.oauth_server import bound_socket, origin, serve_app
from tests.support.timing import scaled

SECRET = "treasury-dev-callback-secret-0001"


def submit(h: Harness, request: dict[str, Any], key: str, **extra: Any) -> httpx.Response:
    return h.submit(submission(request, h.evaluate(request), **extra), key=key)


# -- eligibility (the shared local backend) -----------------------------------------------------


def test_a_requester_cannot_approve_their_own_request(tmp_path: Path):
    principals = [
        {"token": "alice-token", "id": "alice", "roles": ["treasurer", "approver"]},
        {"token": "carol-token", "id": "carol", "roles": ["approver"]},
    ]
    with running_arap(arap_dir(tmp_path, {"principals": principals})) as h:
        url = submit(h, transfer(80_000), "self").headers["location"]
        (request_id,) = h.pending_ids()
        refused = h.decide(request_id, "alice")
        assert refused.status_code == 403
        assert "self-approval" in refused.json()["detail"]
        assert h.status(url).json()["task"]["status"] == "pending"
        assert h.decide(request_id, "carol").status_code == 200
        assert h.status(url).json()["task"]["status"] == "approved"


def test_a_reviewer_without_the_role_is_refused(tmp_path: Path):
    with running_arap(arap_dir(tmp_path)) as h:
        submit(h, transfer(80_001), "role")
        (request_id,) = h.pending_ids()
        assert h.decide(request_id, "bob").status_code == 403  # a treasurer, not an approver


def test_two_of_m_approvers_are_needed_for_a_quarter_close(tmp_path: Path):
    with running_arap(arap_dir(tmp_path)) as h:
        request = tool_call("close_quarter", {"quarter": "2026-Q3"})
        url = submit(h, request, "close").headers["location"]
        (request_id,) = h.pending_ids()
        assert h.decide(request_id, "carol").status_code == 200
        assert h.status(url).json()["task"]["status"] == "pending"
        assert h.decide(request_id, "carol").status_code == 409  # one decision per reviewer
        assert h.decide(request_id, "dave").status_code == 200
        body = h.status(url).json()
        assert body["task"]["status"] == "approved"
        request["context"]["approval"] = body["result"]["approval"]
        assert h.evaluate(request)["decision"] is True


def test_reviewers_see_redacted_arguments_and_the_audit_trail(tmp_path: Path):
    directory = arap_dir(tmp_path, {"approval": {"redact_arguments": ["to"]}})
    with running_arap(directory) as h:
        submit(h, transfer(80_002, to="secret-account"), "redact")
        listing = h.http.get("/approvals", headers={"Authorization": "Bearer carol-token"}).json()["approvals"]
        (item,) = listing
        assert item["arguments"] == {"amount": 80_002, "to": "[redacted]"}
        assert (item["tool"], item["requester"], item["template"]) == ("wire_transfer", "alice", "treasury")
        assert item["title"] == "Large wire transfer"
        h.decide(item["id"], "carol")
        assert h.server is not None
        store_url = h.server.config.store_url()

    async def events() -> list[tuple[str, dict[str, Any]]]:
        database = open_database(store_url)
        try:
            return [(event.kind, dict(event.data)) for event in await AuditLog(database).events(subject=item["id"])]
        finally:
            await database.close()

    recorded = asyncio.run(events())
    assert [kind for kind, _ in recorded] == [
        "approval.submitted",
        "arap.task_created",
        "approval.decision",
        "approval.approved",
        "arap.approval_issued",
    ]
    # The events about the call name its digest, never the (redacted or not) argument values.
    digests = {data["call_digest"] for kind, data in recorded if kind != "arap.approval_issued"}
    assert digests == {arguments_digest({"to": "secret-account", "amount": 80_002})}
    assert "secret-account" not in json.dumps(recorded)


def test_the_reviewer_console_is_mounted(tmp_path: Path):
    with running_arap(arap_dir(tmp_path)) as h:
        response = h.http.get("/console", follow_redirects=True)
        assert response.status_code == 200
        assert "text/html" in response.headers["content-type"]


def test_the_review_cli_decides_on_the_arap_server_store(tmp_path: Path):
    directory = arap_dir(tmp_path)
    config = str(directory / "arap-server.toml")
    with running_arap(directory) as h:
        url = submit(h, transfer(80_003), "cli").headers["location"]
        listed = subprocess.run(
            [sys.executable, "-m", "mcp_approval", "review", "list", "--config", config, "--json"],
            capture_output=True, text=True, timeout=scaled(60), check=True,
        )  # fmt: skip
        (item,) = json.loads(listed.stdout)["approvals"]
        subprocess.run(
            [sys.executable, "-m", "mcp_approval", "review", "approve", item["id"], "--config", config, "--as", "dave"],
            capture_output=True, text=True, timeout=scaled(60), check=True,
        )  # fmt: skip
        assert h.status(url).json()["task"]["status"] == "approved"


# -- callbacks ----------------------------------------------------------------------------------


def test_a_callback_is_signed_and_goes_only_to_an_allowlisted_endpoint(tmp_path: Path):
    received: list[tuple[bytes, str | None]] = []

    async def hook(request: Request) -> Response:
        received.append((await request.body(), request.headers.get("x-approval-signature")))
        return Response(status_code=204)

    sock = bound_socket()
    hook_url = origin(sock) + "/hook"
    with serve_app(Starlette(routes=[Route("/hook", hook, methods=["POST"])]), sock):
        directory = arap_dir(tmp_path, {"arap": {"callback_allowlist": [origin(sock)]}})
        with running_arap(directory) as h:
            refused = submit(h, transfer(80_010), "cb-bad", callback={"endpoint": "http://127.0.0.1:1/hook"})
            assert refused.status_code == 400
            assert "allowlist" in refused.json()["detail"]
            private = submit(h, transfer(80_011), "cb-private", callback={"endpoint": "https://10.1.2.3/hook"})
            assert private.status_code == 400
            response = submit(h, transfer(80_012), "cb", callback={"endpoint": hook_url, "state": "pep-state-1"})
            assert response.status_code == 202, response.text
            task = response.json()["task"]
            h.approve_only_pending()
            deadline = time.monotonic() + scaled(15)
            while not received and time.monotonic() < deadline:
                time.sleep(0.02)  # polling the receiver for the delivery, bounded by the deadline
    (raw, signature), *more = received
    assert not more
    assert verify_callback(SECRET, raw, signature, int(time.time()))
    assert not verify_callback("another-secret-value", raw, signature, int(time.time()))
    assert json.loads(raw) == {
        "state": "pep-state-1",
        "task": {"id": task["id"], "status": "approved", "status_endpoint": task["status_endpoint"]},
    }


@pytest.mark.parametrize(
    ("endpoint", "dev_mode", "allowed"),
    [
        ("https://pep.example.com/cb", False, True),
        ("https://pep.example.com:8443/cb", False, False),  # another origin than the allowlisted one
        ("http://pep.example.com/cb", False, False),
        ("https://evil.example.com/cb", False, False),
        ("http://127.0.0.1:8000/cb", False, False),  # loopback needs dev mode...
        ("http://127.0.0.1:8000/cb", True, True),  # ...and the allowlist
        ("http://127.0.0.1:9999/cb", True, False),
        ("https://169.254.169.254/latest", True, False),
        ("https://192.168.1.1/cb", False, False),
        ("ftp://pep.example.com/cb", False, False),
        (42, False, False),
    ],
)
def test_callback_endpoint_rules(endpoint: Any, dev_mode: bool, allowed: bool):
    allowlist = ["https://pep.example.com", "http://127.0.0.1:8000", "https://192.168.1.1"]
    assert (callback_problem(endpoint, allowlist, dev_mode=dev_mode) is None) is allowed


def test_callbacks_are_refused_without_a_secret(tmp_path: Path):
    with running_arap(arap_dir(tmp_path, {"arap": {"callback_secret": None}})) as h:
        callback = {"endpoint": "http://127.0.0.1:8000/cb"}
        assert submit(h, transfer(80_013), "no-secret", callback=callback).status_code == 400


# -- https --------------------------------------------------------------------------------------


def test_https_base_urls_are_accepted():
    assert check_base_url("https://pdp.example.com/", dev_mode=False) == "https://pdp.example.com"


@pytest.mark.parametrize("dev_mode", [False, True])
def test_http_off_loopback_is_refused_even_in_dev_mode(dev_mode: bool):
    with pytest.raises(ValueError, match="https"):
        check_base_url("http://pdp.example.com", dev_mode=dev_mode)


def test_http_on_loopback_needs_dev_mode_and_warns(caplog: pytest.LogCaptureFixture):
    with pytest.raises(ValueError, match="dev_mode"):
        check_base_url("http://127.0.0.1:8181", dev_mode=False)
    with caplog.at_level(logging.WARNING, logger="mcp_approval.reference"):
        assert check_base_url("http://127.0.0.1:8181", dev_mode=True) == "http://127.0.0.1:8181"
    assert any(r.levelno == logging.WARNING and "deviation" in r.message for r in caplog.records)


@pytest.mark.parametrize(("mode", "warned"), [(0o644, True), (0o600, False)])
def test_a_signing_key_file_others_may_read_draws_one_warning_at_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, mode: int, warned: bool
):
    directory = arap_dir(tmp_path)
    key_file = directory / "arap-dev-signing-key.pem"
    key_file.chmod(mode)
    with caplog.at_level(logging.WARNING):
        server = build_arap_server(load_arap_config(directory / "arap-server.toml"), base_url="http://127.0.0.1:8181")
    assert server.base_url == "http://127.0.0.1:8181"  # it starts all the same
    warnings = [r.getMessage() for r in caplog.records if "secret file" in r.getMessage()]
    expected = f"arap.signing_key_file: the secret file {key_file} is readable by group or others (mode {mode:04o})"
    assert [w.removesuffix("; chmod 600 it") for w in warnings] == ([expected] if warned else [])


def test_the_cli_refuses_plain_http_without_dev_mode(tmp_path: Path):
    directory = arap_dir(tmp_path, {"arap": {"dev_mode": False}})
    command = [sys.executable, "-m", "mcp_approval", "arap-server", "--config", str(directory / "arap-server.toml")]
    result = subprocess.run([*command, "--port", "0"], capture_output=True, text=True, timeout=scaled(60))
    assert result.returncode == 2
    assert "https" in result.stderr
    assert "listening" not in result.stdout
