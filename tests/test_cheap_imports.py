"""Helpers other layers need load a few modules, never the approval engine or the composition.

Each import runs in a fresh interpreter, so what it loads is what a user of that helper pays.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# The module, and the most modules of the package its import may load.
CHEAP = [
    ("mcp_approval.crashpoints", 4),
    ("mcp_approval.backends.callbacks", 16),
    ("mcp_approval.approval.persistence.schema", 16),
    ("mcp_approval.approval.persistence.states", 8),
    ("mcp_approval.approval.persistence.outcomes", 22),
    ("mcp_approval.reviewers.throttle", 16),
    ("mcp_approval.client", 32),
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
print(json.dumps(sorted(name for name in sys.modules if name.startswith("mcp_approval"))))
"""


def loaded_by(module: str) -> list[str]:
    """The package's modules a fresh interpreter has loaded after importing ``module``."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(module=module)], check=True, capture_output=True, text=True, timeout=60
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
