"""Bodies are refused while they stream in, past each endpoint's limit, never buffered whole.

Each request below sends its headers and more bytes than the endpoint accepts, then stops without
ending the body. An endpoint that read the whole body first would wait for the rest (and, sent
it, hold all of it); a bounded one answers 413 at once. Real ``serve`` and ``arap-server``
processes on 127.0.0.1.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from mcp_approval.backends.callbacks import CALLBACK_PATH
from mcp_approval.policy.http import EVALUATION_PATH, EVALUATIONS_PATH
from mcp_approval.reference.ars_routes import MAX_BODY_BYTES, REQUESTS_PATH
from mcp_approval.reference.pdp_api import MAX_EVALUATION_BYTES
from mcp_approval.reviewers.api import MAX_DECISION_BYTES
from tests.support.arap import ARS_CLIENT_TOKEN, ArapDeployment, arap_deployment
from tests.support.timing import scaled


def status_of_unfinished_body(base_url: str, path: str, sent: int, *, headers: dict[str, str]) -> int:
    """POST ``sent`` bytes of a chunked JSON body that never ends; the status the server answers with."""
    parts = urlsplit(base_url)
    with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=scaled(10)) as conn:
        lines = [f"POST {path} HTTP/1.1", f"Host: {parts.netloc}", "Content-Type: application/json"]
        lines += ["Transfer-Encoding: chunked", *(f"{name}: {value}" for name, value in headers.items())]
        conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        chunk = b"[" + b" " * (64 * 1024 - 1)
        remaining = sent
        while remaining > 0:
            piece = chunk[: min(len(chunk), remaining)]
            conn.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            remaining -= len(piece)
        answer = conn.recv(4096)  # times out (fails the test) when the server waits for the rest
    return int(answer.split(b" ", 2)[1])


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ArapDeployment]:
    started = arap_deployment(tmp_path_factory.mktemp("limits")).start()
    try:
        yield started
    finally:
        started.kill()


def test_the_decide_endpoint_refuses_a_body_past_its_limit(deployment: ArapDeployment) -> None:
    headers = {"Authorization": "Bearer carol-token"}
    status = status_of_unfinished_body(
        deployment.ars.base_url, "/approvals/apr_x/decide", MAX_DECISION_BYTES + 1, headers=headers
    )
    assert status == 413


@pytest.mark.parametrize("path", [EVALUATION_PATH, EVALUATIONS_PATH])
def test_the_pdp_refuses_an_evaluation_body_past_its_limit(deployment: ArapDeployment, path: str) -> None:
    assert status_of_unfinished_body(deployment.ars.base_url, path, MAX_EVALUATION_BYTES + 1, headers={}) == 413


def test_the_access_request_endpoint_refuses_a_body_past_its_limit(deployment: ArapDeployment) -> None:
    headers = {"Authorization": f"Bearer {ARS_CLIENT_TOKEN}"}
    status = status_of_unfinished_body(deployment.ars.base_url, REQUESTS_PATH, MAX_BODY_BYTES + 1, headers=headers)
    assert status == 413


def test_the_callback_endpoint_refuses_a_body_past_its_limit(deployment: ArapDeployment) -> None:
    assert status_of_unfinished_body(deployment.serve.base_url, CALLBACK_PATH, 64 * 1024, headers={}) == 413


def test_bounded_endpoints_still_answer_afterwards(deployment: ArapDeployment) -> None:
    with socket.create_connection(("127.0.0.1", deployment.ars.port), timeout=scaled(10)) as conn:
        conn.sendall(b"GET /.well-known/authzen-configuration HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert conn.recv(64).startswith(b"HTTP/1.1 200")
