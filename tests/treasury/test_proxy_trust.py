"""``X-Forwarded-For`` is honoured only from configured proxies, so it cannot reset the sign-in limit.

Real ``serve`` and ``arap-server`` processes on 127.0.0.1: every request comes from loopback, the
address uvicorn trusts by default.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from mcp_approval.web.throttle import DEFAULT_MAX_FAILURES
from tests.support.arap import arap_deployment
from tests.support.timing import scaled
from tests.support.treasury import TreasuryServer, deployment_dir

WRONG = {"authorization": "Bearer not-a-token"}


def _fail_from(client: httpx.Client, forwarded_for: str) -> int:
    response = client.get("/approvals", headers={**WRONG, "x-forwarded-for": forwarded_for})
    return response.status_code


def _rotate_until_limit(base_url: str) -> list[int]:
    """Wrong tokens, each naming a fresh forwarded address, one more than the limit allows."""
    with httpx.Client(base_url=base_url, timeout=scaled(20)) as client:
        return [_fail_from(client, f"203.0.113.{n}") for n in range(DEFAULT_MAX_FAILURES + 1)]


def test_serve_ignores_forwarded_for_by_default(tmp_path: Path) -> None:
    server = TreasuryServer(deployment_dir(tmp_path)).start()
    try:
        statuses = _rotate_until_limit(server.base_url)
    finally:
        server.kill()
    assert statuses[:-1] == [401] * DEFAULT_MAX_FAILURES
    assert statuses[-1] == 429, "a rotated X-Forwarded-For escaped the sign-in limit"


def test_serve_honours_forwarded_for_from_a_configured_proxy(tmp_path: Path) -> None:
    directory = deployment_dir(tmp_path, {"server": {"trusted_proxies": ["127.0.0.1"]}})
    server = TreasuryServer(directory).start()
    try:
        statuses = _rotate_until_limit(server.base_url)
        with httpx.Client(base_url=server.base_url, timeout=scaled(20)) as client:
            repeated = [_fail_from(client, "198.51.100.7") for _ in range(DEFAULT_MAX_FAILURES + 1)]
    finally:
        server.kill()
    # Behind a trusted proxy each forwarded client has its own limit.
    assert statuses == [401] * (DEFAULT_MAX_FAILURES + 1)
    assert repeated[-1] == 429


def test_arap_server_ignores_forwarded_for_by_default(tmp_path: Path) -> None:
    deployment = arap_deployment(tmp_path)
    deployment.ars.start()
    try:
        statuses = _rotate_until_limit(deployment.ars.base_url)
    finally:
        deployment.ars.kill()
    assert statuses[-1] == 429, "a rotated X-Forwarded-For escaped the arap-server's sign-in limit"
