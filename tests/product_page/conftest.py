"""Fixtures: the treasury deployment with ``[tasks] approval_url`` set, as a real ``serve`` process."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from tests.support.timing import scaled
from tests.support.treasury import TreasuryServer, deployment_dir

#: The reviewers' page the deployment links (any https page; the tests never open it).
APPROVAL_URL = "https://reviews.example.test/approvals/{approval_id}?view=decide"


def approval_link(approval_id: str) -> str:
    """The link a client must be shown for ``approval_id``."""
    return APPROVAL_URL.replace("{approval_id}", approval_id)


@pytest.fixture(scope="module")
def linked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TreasuryServer]:
    """One treasury server with ``approval_url`` shared by a module's tests (each uses its own accounts)."""
    directory = deployment_dir(
        tmp_path_factory.mktemp("linked"),
        {"tasks": {"approval_url": APPROVAL_URL}, "approval": {"without_tasks": "degraded"}},
    )
    server = TreasuryServer(directory).start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
async def http(linked: TreasuryServer) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of the module's linked treasury server."""
    async with httpx.AsyncClient(base_url=linked.base_url, timeout=scaled(20)) as client:
        yield client
