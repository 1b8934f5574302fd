"""``/metrics`` of a real ``serve``: off by default, guarded by its own bearer token, parsed by the
Prometheus text parser, and its numbers move as approvals are requested, decided and executed, on
SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from mcp_approval.config import ConfigError, load_config
from mcp_approval.server.deployment import build_deployment
from tests.support.metrics import Samples, parse_samples, sample_value
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, deployment_dir, principals
from tests.treasury.helpers import approval_for, settled

pytestmark = pytest.mark.anyio

TOKEN = "scrape-token-of-some-length"


async def _scrape(http: httpx.AsyncClient) -> Samples:
    response = await http.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return parse_samples(response.text)


async def test_metrics_move_as_a_served_approval_flow_runs(tmp_path: Path, db_url: str) -> None:
    directory = deployment_dir(tmp_path, {"metrics": {"enabled": True, "bearer_token": TOKEN}})
    server = await asyncio.to_thread(TreasuryServer(directory, db_url=db_url).start)
    try:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(20)) as http:
            assert (await http.get("/metrics")).status_code == 401
            wrong = await http.get("/metrics", headers={"Authorization": "Bearer nope"})
            assert (wrong.status_code, wrong.headers["www-authenticate"]) == (401, "Bearer")
            before = await _scrape(http)

            alice, carol = principals(http)["alice"], Reviewer(http, "carol-token")
            approved = (await alice.call_tool("wire_transfer", {"to": "acct-m1", "amount": 30_000})).result["taskId"]
            denied = (await alice.call_tool("wire_transfer", {"to": "acct-m2", "amount": 40_000})).result["taskId"]
            first = await approval_for(carol, "wire_transfer", to="acct-m1")
            second = await approval_for(carol, "wire_transfer", to="acct-m2")
            waiting = await _scrape(http)
            assert (await carol.decide(first["id"], "approve")).status_code == 200
            assert (await carol.decide(second["id"], "deny")).status_code == 200
            await settled(alice, approved)
            await settled(alice, denied)
            after = await _scrape(http)
    finally:
        server.kill()

    assert sample_value(before, "mcp_approval_pending_approvals", template="treasury") == 0
    assert sample_value(waiting, "mcp_approval_pending_approvals", template="treasury") == 2
    assert sample_value(after, "mcp_approval_pending_approvals", template="treasury") == 0

    def moved(name: str, **labels: str) -> float:
        return sample_value(after, name, **labels) - sample_value(before, name, **labels)

    assert moved("mcp_approval_decisions_total", outcome="approved") == 1
    assert moved("mcp_approval_decisions_total", outcome="denied") == 1
    assert moved("mcp_approval_time_to_decision_seconds_count") == 2
    assert moved("mcp_approval_time_to_decision_seconds_bucket", le="+Inf") == 2
    assert moved("mcp_approval_executions_total", disposition="approved-executed") == 1
    assert moved("mcp_approval_executions_total", disposition="denied-not-executed") == 1
    assert ("mcp_approval_store_errors_total", ()) in after
    assert sample_value(after, "mcp_approval_store_errors_total") == 0


def test_metrics_are_off_by_default(tmp_path: Path) -> None:
    deployment = build_deployment(load_config(deployment_dir(tmp_path) / "config.toml"), base_url="http://x")
    paths = {getattr(route, "path", None) for route in deployment.approvals.routes()}
    assert "/approvals" in paths
    assert "/metrics" not in paths


def test_enabled_metrics_need_a_bearer_token(tmp_path: Path) -> None:
    directory = deployment_dir(tmp_path, {"metrics": {"enabled": True}})
    with pytest.raises(ConfigError, match=r"metrics\.bearer_token: required when metrics\.enabled is true"):
        load_config(directory / "config.toml")
