"""The browser tests' fixtures: Debian's Chromium and where screenshots are kept (``tests/conftest.py``
offers both to every test)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REQUIRE_SERVICES = os.environ.get("MCP_APPROVAL_REQUIRE_SERVICES") == "1"


@pytest.fixture(scope="module")
def chromium() -> Path:
    """Debian's chromium (``$MCP_APPROVAL_CHROMIUM`` elsewhere) for the browser tests; skipped without
    it, unless CI requires it."""
    executable = Path(os.environ.get("MCP_APPROVAL_CHROMIUM", "/usr/bin/chromium"))
    if not (executable.is_file() and os.access(executable, os.X_OK)):
        message = f"no Chromium executable at {executable} (apt-get install chromium, or set MCP_APPROVAL_CHROMIUM)"
        if REQUIRE_SERVICES:
            pytest.fail(message + "; MCP_APPROVAL_REQUIRE_SERVICES=1 requires it")
        pytest.skip(message)
    return executable


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the browser tests keep screenshots: ``$MCP_APPROVAL_ARTIFACTS``, else a temporary directory."""
    configured = os.environ.get("MCP_APPROVAL_ARTIFACTS")
    directory = Path(configured) if configured else tmp_path_factory.mktemp("artifacts")
    directory.mkdir(parents=True, exist_ok=True)
    return directory
