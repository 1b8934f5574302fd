"""Schemathesis against the OpenAPI documents ``serve`` and ``arap-server`` publish.

Every generated request (valid and invalid bodies, parameters and headers, with a reviewer's
token, an ARS client's token, or none) must get an answer below 500, within the hang limit, and
the server must answer its health request afterwards. Nothing in the logs may be a traceback.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.generation.modes import GenerationMode

from tests.fuzz.conftest import FUZZ_CASES, REQUEST_TIMEOUT_S, TALLY, assert_healthy
from tests.support.arap import ARS_CLIENT_TOKEN, ArapServerProcess
from tests.support.treasury import TreasuryServer

pytestmark = pytest.mark.fuzz

FUZZ_SETTINGS = settings(max_examples=FUZZ_CASES, deadline=None, database=None, suppress_health_check=list(HealthCheck))


def token_for(path: str) -> str:
    """A credential the operation accepts: the ARS client's on ARAP requests, else a reviewer's."""
    return ARS_CLIENT_TOKEN if "/access/v1/requests" in path else "carol-token"


def exercise(case: Any, base_url: str) -> None:
    """Send one generated case; it must be answered below 500, and the server must stay healthy."""
    response = case.call(
        base_url=base_url, headers={"Authorization": f"Bearer {token_for(case.path)}"}, timeout=REQUEST_TIMEOUT_S
    )
    TALLY.record(response.status_code)
    where = f"{case.method} {case.formatted_path}"
    assert response.status_code < 500, f"{where}: {response.status_code} {response.text[:500]}"
    assert_healthy(base_url)


def fuzz(base_url: str) -> list[str]:
    """Every operation of the server's published document, with data that fits it and data that does not.

    Returns the operations exercised (``METHOD path``).
    """
    schema = schemathesis.openapi.from_url(base_url + "/openapi.json", timeout=REQUEST_TIMEOUT_S)
    exercised = []
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @FUZZ_SETTINGS
            @given(case=operation.as_strategy(generation_mode=mode))
            def run(case: Any) -> None:
                exercise(case, base_url)

            try:
                run()
            except Unsatisfiable:
                if mode is GenerationMode.POSITIVE:
                    raise
                # An operation without parameters or body has nothing to get wrong.
        exercised.append(f"{operation.method.upper()} {operation.path}")
    return exercised


def test_serve_http_endpoints(fuzzed_serve: TreasuryServer) -> None:
    exercised = fuzz(fuzzed_serve.base_url)
    assert {"POST /approvals/{request_id}/decide", "POST /console/login", "POST /approvals/callback"} <= set(exercised)


def test_arap_server_http_endpoints(fuzzed_arap_server: ArapServerProcess) -> None:
    exercised = fuzz(fuzzed_arap_server.base_url)
    assert {"POST /access/v1/evaluation", "POST /access/v1/requests", "GET /approvals"} <= set(exercised)


def test_no_tracebacks_in_the_logs(fuzzed_serve: TreasuryServer, fuzzed_arap_server: ArapServerProcess) -> None:
    for log in (fuzzed_serve.log(), fuzzed_arap_server.log()):
        assert "Traceback" not in log
        assert "Exception in ASGI application" not in log
