"""Helpers other layers need load a few modules, never the approval engine or the composition.

Each import runs in a fresh interpreter, so what it loads is what a user of that helper pays.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.timing import scaled

# The module, and the most modules of the package its import may load (storage loads
# ``mcp_approval.errors``, the exception root, and ``storage.errors``, its busy-or-down errors; the
# callbacks' body reading is in ``web``).
CHEAP = [
    ("mcp_approval.crashpoints", 4),
    ("mcp_approval.backends.callbacks", 19),
    ("mcp_approval.approval.persistence.schema", 18),
    ("mcp_approval.approval.persistence.states", 8),
    ("mcp_approval.approval.persistence.outcomes", 23),
    ("mcp_approval.web.throttle", 16),
    ("mcp_approval.client", 32),
    # The conformance kit is a black-box client: nothing of the server side, only the protocol constants.
    ("mcp_approval.checks", 16),
]
HEAVY = (
    "mcp_approval.approval.service",
    "mcp_approval.approval.engine",
    "mcp_approval.server",
    "mcp_approval.tasks.server",
)

PROBE = """
import json, sys
import {module}
print(json.dumps(sorted(name for name in sys.modules if name.startswith("{prefix}"))))
"""
#: What ``mcp-approval review`` and reading a deployment file never need: the metrics endpoint,
#: Cedar, the HTTP server and its framework, the notification channels' clients, SQLAlchemy's ORM (a
#: SQLite store needs only its Core), the MCP SDK, a terminal renderer (the tables are plain text).
NOT_FOR_REVIEW = (
    "prometheus_client",
    "cedarpy",
    "uvicorn",
    "starlette",
    "standardwebhooks",
    "apprise",
    "slack_bolt",
    "slack_sdk",
    "aiohttp",
    "sqlalchemy.orm",
    "mcp.",
    "rich",
)


def loaded_by(module: str, prefix: str = "mcp_approval") -> list[str]:
    """The modules named ``prefix...`` a fresh interpreter has loaded after importing ``module``."""
    probe = PROBE.format(module=module, prefix=prefix)
    out = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True, timeout=scaled(60)
    ).stdout
    return list(json.loads(out))


@pytest.mark.parametrize(("module", "most"), CHEAP, ids=[module for module, _ in CHEAP])
def test_a_cross_layer_helper_loads_few_modules(module: str, most: int) -> None:
    loaded = loaded_by(module)
    heavy = [name for name in loaded if name.startswith(HEAVY)]
    assert heavy == [], f"importing {module} loads {heavy}"
    assert len(loaded) <= most, f"importing {module} loads {len(loaded)} modules: {loaded}"


def test_the_probe_sees_a_heavy_import() -> None:
    """The measure can fail: the composition root does load the engine."""
    loaded = loaded_by("mcp_approval.server.approvals")
    assert "mcp_approval.approval.service" in loaded
    assert len(loaded) > 60


def test_the_review_command_loads_no_server_composition() -> None:
    """``mcp-approval review`` decides on the database: the MCP server and its composition stay unloaded."""
    loaded = loaded_by("mcp_approval.cli.review")
    assert [
        name for name in loaded if name.startswith(("mcp_approval.server.approvals", "mcp_approval.approval.service"))
    ] == []


@pytest.mark.parametrize("module", ["mcp_approval.config", "mcp_approval.cli.review"])
def test_the_review_command_and_the_configuration_load_no_server_libraries(module: str) -> None:
    """``review list`` starts in a fraction of a second: none of what only a serving process uses is loaded."""
    loaded = loaded_by(module, prefix="")
    assert [name for name in loaded if name.startswith(NOT_FOR_REVIEW) or name == "mcp"] == []


def test_the_library_probe_sees_a_server_library() -> None:
    """The measure can fail: the deployment composition does load the MCP SDK and uvicorn's peers."""
    loaded = loaded_by("mcp_approval.server.deployment", prefix="")
    assert "mcp" in loaded
    assert any(name.startswith("cedarpy") for name in loaded)
