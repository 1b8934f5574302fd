"""The command line holds cyclic garbage collection off while it starts, and every command resumes it.

Each probe runs the real command line in a fresh interpreter, with the step it watches wrapped.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.timing import scaled
from tests.support.treasury import deployment_dir

SERVE_PROBE = """
import gc, json, sys
import uvicorn
import mcp_approval.server.deployment as deployment

seen = {}
build = deployment.build_deployment

def watched_build(*args, **kwargs):
    seen["collecting while building"] = gc.isenabled()
    return build(*args, **kwargs)

def not_serving(*args, **kwargs):
    seen["collecting when serving"] = gc.isenabled()
    seen["start-up frozen"] = gc.get_freeze_count() > 0
    print(json.dumps(seen))

deployment.build_deployment = watched_build
uvicorn.run = not_serving
sys.argv = ["mcp-approval", "serve", "--config", sys.argv[1], "--port", "0"]
from mcp_approval.cli.main import main
main()
"""

COMMAND_PROBE = """
import gc, json, sys
from mcp_approval.cli.main import app, main

@app.command("probe")
def probe() -> None:
    print(json.dumps({"collecting": gc.isenabled(), "start-up frozen": gc.get_freeze_count() > 0}))

sys.argv = ["mcp-approval", "probe"]
main()
"""


def probe(source: str, *args: str) -> dict[str, bool]:
    done = subprocess.run(
        [sys.executable, "-c", source, *args], capture_output=True, text=True, timeout=scaled(120), check=False
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_serve_builds_without_collection_and_serves_with_it(tmp_path: Path) -> None:
    config = deployment_dir(tmp_path) / "config.toml"
    assert probe(SERVE_PROBE, str(config)) == {
        "collecting while building": False,
        "collecting when serving": True,
        "start-up frozen": True,
    }


def test_any_other_command_runs_with_collection() -> None:
    assert probe(COMMAND_PROBE) == {"collecting": True, "start-up frozen": True}
