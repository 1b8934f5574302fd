"""Served treasury examples shared by a module's adapter tests: one as the example ships, one stricter."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.treasury import TreasuryServer, deployment_dir

#: The example's threshold for a transfer that needs approval, and the stricter copy's.
THRESHOLD = 'decimal("25000.0")'
STRICT_THRESHOLD = 'decimal("1000.0")'


@pytest.fixture(scope="module")
def treasury(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TreasuryServer]:
    """One treasury server per module (each test uses its own accounts)."""
    server = TreasuryServer(deployment_dir(tmp_path_factory.mktemp("treasury"))).start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture(scope="module")
def strict_treasury(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TreasuryServer]:
    """A second treasury whose policy gates transfers over 1,000 (the example's gates those over 25,000)."""
    directory = deployment_dir(tmp_path_factory.mktemp("strict-treasury"))
    policy = directory / "policy.cedar"
    text = policy.read_text()
    assert THRESHOLD in text, "the treasury policy's threshold moved: update this fixture"
    policy.write_text(text.replace(THRESHOLD, STRICT_THRESHOLD))
    server = TreasuryServer(directory).start()
    try:
        yield server
    finally:
        server.kill()
