"""Fixtures: the treasury deployment served by a real ``mcp-approval serve`` process."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.treasury import TreasuryServer, deployment_dir


@pytest.fixture(scope="module")
def treasury(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TreasuryServer]:
    """One treasury server shared by a module's tests (each test uses its own accounts)."""
    directory = deployment_dir(tmp_path_factory.mktemp("treasury"))
    server = TreasuryServer(directory).start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
async def http(treasury: TreasuryServer) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of the module's treasury server."""
    async with httpx.AsyncClient(base_url=treasury.base_url, timeout=20) as client:
        yield client


@pytest.fixture
def fresh_dir(tmp_path: Path) -> Path:
    """A private copy of the example for a test that needs its own server or settings."""
    return deployment_dir(tmp_path)
