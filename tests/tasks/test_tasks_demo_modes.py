"""The tasks demo server's ``--mode TOOL=MODE``: the benchmarks run ``echo`` as an optional tool with it."""

from __future__ import annotations

import httpx
import pytest

from mcp_approval.checks.wire import Wire
from mcp_approval.testing.tasks_demo import main
from tests.support.process import running
from tests.support.timing import scaled

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def test_mode_overrides_change_how_a_tool_is_answered(tmp_path):
    db_url = f"sqlite:///{tmp_path / 'modes.db'}"
    flags = ("--threshold", "0", "--mode", "echo=required", "--mode", "slow_job=forbidden")
    with running(db_url, tmp_path, *flags) as server:
        wire = Wire(httpx.AsyncClient(base_url=server.base_url, timeout=scaled(10)))
        echoed = (await wire.call_tool("echo", {"text": "hi"})).result
        slow = (await wire.call_tool("slow_job", {"seconds": 0.2, "label": "inline"})).result
    assert echoed["resultType"] == "task"  # forbidden by default, required here
    assert slow["content"][0]["text"] == "inline finished after 0.2s"  # a task at threshold 0 by default


@pytest.mark.parametrize("mode", ["echo", "echo=sometimes", "=optional"])
def test_a_malformed_mode_is_a_usage_error(mode, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--port", "1", "--mode", mode])
    assert exited.value.code == 2
    assert "--mode" in capsys.readouterr().err
