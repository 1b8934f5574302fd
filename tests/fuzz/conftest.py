"""Live servers for the fuzz tests, the case budget, and the tally printed at the end of the run.

``MCP_APPROVAL_FUZZ_CASES`` is the number of generated cases per operation (Schemathesis) or per
test (the MCP endpoint); the default keeps an ordinary test run short, and CI's fuzzing step
raises it. Every case is followed by a health request (``GET /openapi.json``), so a case that
stops the server fails where it happens.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from mcp_approval.openapi import OPENAPI_PATH
from tests.support.arap import ArapServerProcess, arap_deployment
from tests.support.timing import scaled
from tests.support.treasury import TreasuryServer, deployment_dir

#: Generated cases per operation or test.
FUZZ_CASES = int(os.environ.get("MCP_APPROVAL_FUZZ_CASES", "2"))
#: The longest any one fuzz request may take before it counts as a hang.
REQUEST_TIMEOUT_S = scaled(30.0)
#: The local-mode ``serve`` fuzzed: reviewer API, console, signed callbacks and metrics all mounted.
SERVE_OVERRIDES = {
    "approval": {"callback_secret": "fuzz-callback-secret-" + "x" * 16},
    "metrics": {"enabled": True, "bearer_token": "metrics-token"},
}


@dataclass
class Tally:
    """What the fuzz tests sent and how many answers were server errors (5xx)."""

    cases: int = 0
    server_errors: int = 0

    def record(self, status: int) -> None:
        self.cases += 1
        if status >= 500:
            self.server_errors += 1


TALLY = Tally()


def assert_healthy(base_url: str) -> None:
    """The server still answers (its OpenAPI document) within the hang limit."""
    response = httpx.get(base_url + OPENAPI_PATH, timeout=REQUEST_TIMEOUT_S)
    assert response.status_code == 200, f"the server no longer answers: {response.status_code}"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if TALLY.cases:
        terminalreporter.write_line(
            f"fuzz: {TALLY.cases} cases ({FUZZ_CASES} per operation), {TALLY.server_errors} answered 5xx"
        )


@pytest.fixture(scope="session")
def fuzzed_serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TreasuryServer]:
    """``mcp-approval serve`` with the treasury example, local backend."""
    server = TreasuryServer(deployment_dir(tmp_path_factory.mktemp("fuzz-serve"), SERVE_OVERRIDES))
    server.start(timeout_s=scaled(120))
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture(scope="session")
def fuzzed_arap_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ArapServerProcess]:
    """``mcp-approval arap-server``: the reference PDP, the Access Request Service, reviewers."""
    server = arap_deployment(tmp_path_factory.mktemp("fuzz-arap")).ars
    server.start(timeout_s=scaled(120))
    try:
        yield server
    finally:
        server.kill()
