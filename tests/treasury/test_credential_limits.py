"""Wrong credentials at ``/metrics`` and at the Access Request Service are limited like reviewer sign-ins.

Each endpoint that takes a credential refuses a client address with too many recent failures
(``429`` with ``Retry-After``) before checking what it sends. The scraper's and the ARS clients'
limits are their own (their failures do not lock reviewers out) and are kept in the store, so a
restarted process (like every other worker on the store) still knows them. Real ``serve`` and
``arap-server`` processes on 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx

from mcp_approval.web.throttle import DEFAULT_MAX_FAILURES
from tests.support.arap import ARS_CLIENT_TOKEN, arap_deployment
from tests.support.timing import scaled
from tests.support.treasury import TreasuryServer, deployment_dir

METRICS_TOKEN = "scrape-token-of-some-length"


def assert_throttled_after_the_limit(attempt: Callable[[str], httpx.Response], valid: str) -> None:
    """``valid`` works and does not count; the limit's worth of wrong tokens are 401s, then even ``valid`` is 429."""
    assert attempt(valid).status_code == 200
    statuses = [attempt(f"guess-{n}-of-a-token").status_code for n in range(DEFAULT_MAX_FAILURES)]
    assert statuses == [401] * DEFAULT_MAX_FAILURES
    refused = attempt("guess-next-of-a-token")
    assert refused.status_code == 429, refused.text
    assert int(refused.headers["retry-after"]) >= 1
    assert attempt(valid).status_code == 429  # refused before the token is checked


def test_wrong_metrics_tokens_are_throttled_and_the_limit_outlives_the_process(tmp_path: Path) -> None:
    directory = deployment_dir(tmp_path, {"metrics": {"enabled": True, "bearer_token": METRICS_TOKEN}})
    server = TreasuryServer(directory).start()
    try:
        with httpx.Client(base_url=server.base_url, timeout=scaled(20)) as client:

            def scrape(token: str) -> httpx.Response:
                return client.get("/metrics", headers={"authorization": f"Bearer {token}"})

            assert_throttled_after_the_limit(scrape, METRICS_TOKEN)
            assert client.get("/approvals", headers={"authorization": "Bearer carol-token"}).status_code == 200
            server.kill()
            server.start()
            assert scrape(METRICS_TOKEN).status_code == 429
    finally:
        server.kill()
    assert "Traceback" not in server.log()


def test_wrong_client_tokens_at_the_access_request_service_are_throttled(tmp_path: Path) -> None:
    ars = arap_deployment(tmp_path).ars.start()
    try:
        with httpx.Client(base_url=ars.base_url, timeout=scaled(20)) as client:

            def look(token: str) -> httpx.Response:
                # An unknown request of the caller is a 404 to a valid client; accept it as "let in".
                response = client.get("/access/v1/requests/no-such-task", headers={"authorization": f"Bearer {token}"})
                return httpx.Response(200) if response.status_code == 404 else response

            assert_throttled_after_the_limit(look, ARS_CLIENT_TOKEN)
            refused = client.get("/access/v1/requests/no-such-task", headers={"authorization": "Bearer x"})
            assert refused.headers["content-type"] == "application/problem+json"
            assert refused.json()["status"] == 429
            submitted = client.post("/access/v1/requests", json={}, headers={"authorization": "Bearer x"})
            assert submitted.status_code == 429
            assert client.get("/approvals", headers={"authorization": "Bearer carol-token"}).status_code == 200
            ars.kill()
            ars.start()
            assert look(ARS_CLIENT_TOKEN).status_code == 429
    finally:
        ars.kill()
    assert "Traceback" not in ars.log()
