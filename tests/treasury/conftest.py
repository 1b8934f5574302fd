"""Fixtures: the treasury deployment served by a real ``mcp-approval serve`` process."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.arap import ArapServerProcess, arap_deployment
from tests.support.timing import scaled
from tests.support.treasury import TreasuryServer, deployment_dir

#: These modules check the degraded answer to clients without tasks; tests/approval/test_without_tasks.py
#: and tests/treasury/test_without_tasks_crash.py cover the example's default, "request".
DEGRADED = {"approval": {"without_tasks": "degraded"}}


@pytest.fixture(scope="module")
def treasury(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TreasuryServer]:
    """One treasury server shared by a module's tests (each test uses its own accounts)."""
    directory = deployment_dir(tmp_path_factory.mktemp("treasury"), DEGRADED)
    server = TreasuryServer(directory).start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
async def http(treasury: TreasuryServer) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of the module's treasury server."""
    async with httpx.AsyncClient(base_url=treasury.base_url, timeout=scaled(20)) as client:
        yield client


@pytest.fixture
def fresh_dir(tmp_path: Path) -> Path:
    """A private copy of the example for a test that needs its own server or settings."""
    return deployment_dir(tmp_path)


@dataclass
class Scenario:
    """One treasury deployment of a scenario module: ``local`` backend, or ``arap`` (HttpPDP + ARS)."""

    mode: str
    server: TreasuryServer
    #: Where reviewers decide: ``serve`` itself (local) or the arap-server (ARAP).
    reviewer_url: str
    ars: ArapServerProcess | None = None


@pytest.fixture(scope="module", params=["local", "arap"])
def scenario(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    """The module's deployment in each mode; MCP-visible outcomes must not depend on it."""
    if request.param == "local":
        server = TreasuryServer(deployment_dir(tmp_path_factory.mktemp("treasury"), DEGRADED)).start()
        try:
            yield Scenario("local", server, server.base_url)
        finally:
            server.kill()
        return
    pair = arap_deployment(tmp_path_factory.mktemp("treasury-arap"), DEGRADED).start()
    try:
        yield Scenario("arap", pair.serve, pair.ars.base_url, pair.ars)
    finally:
        pair.kill()


@pytest.fixture
async def reviewers(scenario: Scenario) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of the reviewer API of the scenario's deployment."""
    async with httpx.AsyncClient(base_url=scenario.reviewer_url, timeout=scaled(20)) as client:
        yield client
