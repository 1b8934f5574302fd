"""The treasury tools plus ``slow_report``, a permitted tool that runs until cancelled or done.

A deployment file names this module in ``[tools] module``; the shutdown test needs a task that
is still running when the server stops.
"""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer


def register(server: MCPServer[Any], settings: dict[str, Any], base_dir: Path) -> None:
    """The example's tools (from the deployment's copy of ``tools.py``) and ``slow_report``."""
    spec = importlib.util.spec_from_file_location("product_page_treasury_tools", base_dir / "tools.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.register(server, settings, base_dir)
    started = base_dir / "slow_report.started"

    @server.tool()
    async def slow_report(seconds: float) -> str:
        """Compile a report for ``seconds`` seconds."""
        started.write_text("started")  # the test waits for this instead of sleeping
        await asyncio.sleep(seconds)
        return f"report ready after {seconds}s"
