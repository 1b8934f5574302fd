"""A served treasury example shared by a module's adapter tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.treasury import TreasuryServer, deployment_dir


@pytest.fixture(scope="module")
def treasury(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TreasuryServer]:
    """One treasury server per module (each test uses its own accounts)."""
    server = TreasuryServer(deployment_dir(tmp_path_factory.mktemp("treasury"))).start()
    try:
        yield server
    finally:
        server.kill()
