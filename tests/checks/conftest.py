"""Fixtures of the kit's tests: the SEP server, one process per test module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.checks.sep_rig import SepServer


@pytest.fixture(scope="module")
def sep_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SepServer]:
    """The SEP server (``tests/checks/sep_server.py``); each test makes its own instance in it."""
    server = SepServer(tmp_path_factory.mktemp("sep") / "server.log")
    try:
        yield server
    finally:
        server.kill()
