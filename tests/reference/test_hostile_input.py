"""Malformed input to the reference arap-server gets a 400 problem, never a 500 or a traceback.

The server runs in this process (uvicorn on 127.0.0.1), so its log records are captured here.
"""

from __future__ import annotations

import logging
from pathlib import Path

import httpx
import pytest

from mcp_approval.config import ConfigError
from mcp_approval.reference.config import load_arap_config
from tests.reference.arap_support import CLIENT_TOKEN, PROBLEM_JSON, arap_dir, running_arap, submission, transfer

DEEP = "[" * 5000 + "]" * 5000
JSON = {"content-type": "application/json"}


def assert_problem(response: httpx.Response, status: int, detail_part: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM_JSON)
    assert detail_part in response.json()["detail"]


def assert_no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    assert [record.getMessage() for record in caplog.records if record.exc_info] == []
    assert [record.getMessage() for record in caplog.records if record.levelno >= logging.ERROR] == []


@pytest.mark.parametrize("path", ["/access/v1/evaluation", "/access/v1/evaluations"])
@pytest.mark.parametrize(
    "body",
    [
        DEEP,
        '{"subject": {"type": "user", "id": "alice"}, "context": ' + DEEP + "}",
        # Shallow enough for the parser, deeper than the endpoints accept.
        '{"context": {"a": ' + "[" * 200 + "]" * 200 + "}}",
    ],
)
def test_deeply_nested_json_at_the_pdp_is_a_400(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, path: str, body: str
) -> None:
    with running_arap(arap_dir(tmp_path)) as h:
        assert_problem(h.http.post(path, content=body, headers=JSON), 400, "levels deep")
        assert h.evaluate(transfer(10))["decision"] is True  # and the server still answers
    assert_no_traceback(caplog)


def test_deeply_nested_json_at_the_access_request_service_and_reviewer_api_is_a_400(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with running_arap(arap_dir(tmp_path)) as h:
        headers = {**JSON, "authorization": f"Bearer {CLIENT_TOKEN}", "idempotency-key": "deep-1"}
        response = h.http.post("/access/v1/requests", content='{"subject": ' + DEEP + "}", headers=headers)
        assert_problem(response, 400, "levels deep")
        _decision, created = h.request_for(transfer(90_001))
        assert created.status_code == 202, created.text
        (request_id,) = h.pending_ids()
        reviewer = {**JSON, "authorization": "Bearer carol-token"}
        decided = h.http.post(f"/approvals/{request_id}/decide", content=DEEP, headers=reviewer)
        assert_problem(decided, 400, "levels deep")
        assert h.pending_ids() == [request_id]
    assert_no_traceback(caplog)


@pytest.mark.parametrize(
    "endpoint",
    [
        "http://127.0.0.1:99999/approvals/callback",
        "http://127.0.0.1:port/approvals/callback",
        "http://127.0.0.1:-1/approvals/callback",
        "http://[::1/approvals/callback",
    ],
)
def test_a_malformed_callback_url_is_a_400(tmp_path: Path, caplog: pytest.LogCaptureFixture, endpoint: str) -> None:
    with running_arap(arap_dir(tmp_path)) as h:
        request = transfer(90_002)
        decision = h.evaluate(request)
        response = h.submit(submission(request, decision, callback={"endpoint": endpoint}), key="bad-port")
        assert_problem(response, 400, "not a valid URL")
        assert h.pending_ids() == []
    assert_no_traceback(caplog)


@pytest.mark.parametrize(
    ("endpoint", "detail"),
    [
        ("http://user:pw@127.0.0.1:8000/approvals/callback", "user info"),
        ("http://user@127.0.0.1:8000/approvals/callback", "user info"),
        ("http://127.0.0.1:0/approvals/callback", "port"),
        ("http://127.0.0.1:/approvals/callback", "port"),
    ],
)
def test_a_callback_url_with_user_info_or_no_port_is_a_400(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, endpoint: str, detail: str
) -> None:
    with running_arap(arap_dir(tmp_path)) as h:
        request = transfer(90_003)
        decision = h.evaluate(request)
        response = h.submit(submission(request, decision, callback={"endpoint": endpoint}), key="user-info")
        assert_problem(response, 400, detail)
        assert h.pending_ids() == []
    assert_no_traceback(caplog)


@pytest.mark.parametrize("entry", ["http://u:p@127.0.0.1:8000", "http://127.0.0.1:99999", "https://ars.example:x"])
def test_a_malformed_callback_allowlist_entry_names_file_and_field(tmp_path: Path, entry: str) -> None:
    directory = arap_dir(tmp_path, {"arap": {"callback_allowlist": [entry]}})
    with pytest.raises(ConfigError) as raised:
        load_arap_config(directory / "arap-server.toml")
    assert str(directory / "arap-server.toml") in str(raised.value)
    assert "arap.callback_allowlist" in str(raised.value)
