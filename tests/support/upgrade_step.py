"""The operator's one-time step after an upgrade, run as the deployment guide says: a subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def seal_requests(config: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    """``mcp-approval upgrade seal-requests --config CONFIG ARGUMENTS...``, its output captured."""
    command = [sys.executable, "-m", "mcp_approval", "upgrade", "seal-requests", "--config", str(config), *arguments]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
