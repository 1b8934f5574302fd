"""A server whose store cannot be opened says so in one line, before it claims to serve, and exits 3.

Real ``serve`` and ``arap-server`` subprocesses on a private copy of ``examples/treasury``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.arap import arap_deployment
from tests.support.timing import scaled
from tests.support.treasury import deployment_dir

#: Port 1 on loopback: nothing listens there, so the connection is refused at once.
REFUSED = "postgresql://treasury:s3cret-pw@127.0.0.1:1/treasury"
SHOWN = "postgresql://treasury:***@127.0.0.1:1/treasury"


def _run(command: list[str]) -> subprocess.CompletedProcess[str]:
    environment = os.environ.copy()
    return subprocess.run(command, capture_output=True, text=True, timeout=scaled(60), env=environment)


def _assert_one_line_naming_the_store(done: subprocess.CompletedProcess[str], program: str, shown: str) -> None:
    output = done.stdout + done.stderr
    assert done.returncode == 3, output
    assert "Traceback" not in output
    # Neither "serving <name>: ..." (an INFO line) nor "arap-server listening on ..." came first.
    assert " INFO " not in output
    assert "listening on" not in output
    assert "s3cret-pw" not in output
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith(f"mcp-approval {program}: cannot open the store {shown}: "), output
    # arap-server may warn about its dev mode first; nothing else is printed.
    assert all("WARNING" in line for line in lines[:-1]), output


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (REFUSED, SHOWN),
        ("sqlite:////nonexistent-directory/treasury.db", "sqlite:////nonexistent-directory/treasury.db"),
    ],
)
def test_serve_with_an_unreachable_store_says_so_in_one_line(tmp_path: Path, url: str, shown: str) -> None:
    config = deployment_dir(tmp_path) / "config.toml"
    done = _run([sys.executable, "-m", "mcp_approval", "serve", "--config", str(config), "--port", "0", "--db", url])
    _assert_one_line_naming_the_store(done, "serve", shown)


def test_arap_server_with_an_unreachable_store_says_so_in_one_line(tmp_path: Path) -> None:
    config = arap_deployment(tmp_path).directory / "arap-server.toml"
    command = [sys.executable, "-m", "mcp_approval", "arap-server", "--config", str(config), "--port", "0"]
    done = _run([*command, "--db", REFUSED])
    _assert_one_line_naming_the_store(done, "arap-server", SHOWN)
