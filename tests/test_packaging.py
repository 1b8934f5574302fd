"""What ``import mcp_approval`` and the command line load: the demo, the conformance fixtures and the
reference services stay out until a command asks for them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import mcp_approval
from tests.support.timing import scaled

HEAVY = ("mcp_approval.demo", "mcp_approval.reference", "mcp_approval.testing.conformance")
# What the command line loads before it knows the command: no layer below it.
COMMAND_LINE = [
    "mcp_approval",
    "mcp_approval.cli",
    "mcp_approval.cli._collection",
    "mcp_approval.cli.arap_server",
    "mcp_approval.cli.check",
    "mcp_approval.cli.check_client",
    "mcp_approval.cli.main",
    "mcp_approval.cli.serve",
]


def _loaded_after(statement: str) -> list[str]:
    """The ``mcp_approval`` modules a fresh interpreter holds after running ``statement``."""
    listing = "print(json.dumps(sorted(m for m in sys.modules if m.startswith('mcp_approval'))))"
    probe = f"{statement}\nimport json, sys\n{listing}"
    src = str(Path(mcp_approval.__file__).parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=scaled(120), check=True
    )
    loaded: list[str] = json.loads(done.stdout.splitlines()[-1])
    return loaded


def _heavy(loaded: list[str]) -> list[str]:
    return [name for name in loaded if name.startswith(HEAVY)]


def test_importing_the_package_loads_no_subpackage() -> None:
    assert _loaded_after("import mcp_approval") == ["mcp_approval"]


@pytest.mark.parametrize(
    "statement",
    ["import mcp_approval.cli.main", "from mcp_approval import tasks, approval, backends, client, denials, policy"],
)
def test_the_demo_fixtures_and_reference_services_load_only_when_asked_for(statement: str) -> None:
    loaded = _loaded_after(statement)
    assert "mcp_approval" in loaded
    assert _heavy(loaded) == []


def test_the_command_line_loads_a_command_s_modules_only_to_run_it() -> None:
    assert _loaded_after("import mcp_approval.cli.main") == COMMAND_LINE
