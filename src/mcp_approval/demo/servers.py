"""The demo's servers: real ``mcp-approval`` subprocesses on free loopback ports.

The deployment is the package's copy of the treasury example (``demo/treasury``), materialized
into a scratch folder so the ledger and the SQLite database are the demo's own. Servers are
started with ``python -m mcp_approval ...``, waited for by polling their port, and killed
(SIGKILL, so nothing is left behind) when the demo ends, fails or is interrupted.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from mcp_approval.hosts import unused_loopback_port

__all__ = [
    "ARAP_SERVER_ADDRESS",
    "ARAP_TREASURY_ADDRESS",
    "TREASURY_ADDRESS",
    "ServerProcess",
    "count_ledger",
    "materialize",
    "point_at",
    "remove_tree",
]

#: The package data folder holding the demo deployment.
DEPLOYMENT_PACKAGE = "mcp_approval.demo"
DEPLOYMENT_FOLDER = "treasury"
#: How long a server may take to listen before the demo gives up on it.
START_TIMEOUT_S = 60.0


def materialize(target: Path) -> Path:
    """Copy the embedded demo deployment into ``target``; returns the config file's path."""
    source = resources.files(DEPLOYMENT_PACKAGE).joinpath(DEPLOYMENT_FOLDER)
    target.mkdir(parents=True, exist_ok=True)
    for item in source.iterdir():
        if item.is_file() and not item.name.endswith((".pyc", ".db")):
            (target / item.name).write_bytes(item.read_bytes())
    return target / "config.toml"


#: The addresses the packaged configs name; :func:`point_at` replaces them with the demo's.
TREASURY_ADDRESS = "127.0.0.1:8000"
ARAP_SERVER_ADDRESS = "127.0.0.1:8181"
ARAP_TREASURY_ADDRESS = "127.0.0.1:8001"


def point_at(config_path: Path, addresses: Mapping[str, int]) -> None:
    """Make the addresses in a materialized config (links, the PDP, callbacks) name the ports in use."""
    text = config_path.read_text(encoding="utf-8")
    for packaged, port in addresses.items():
        text = text.replace(packaged, f"127.0.0.1:{port}")
    config_path.write_text(text, encoding="utf-8")


class ServerProcess:
    """One ``python -m <module> <args> --port N`` subprocess on a fixed loopback port.

    Args:
        name: what the narration calls it.
        args: the command's arguments after the module (without ``--port``).
        log_path: where its stdout and stderr go.
        port: the port to listen on; a free one by default. Restarts reuse it.
        module: the module run with ``python -m``.
    """

    def __init__(
        self,
        name: str,
        args: Sequence[str],
        *,
        log_path: Path,
        port: int | None = None,
        module: str = "mcp_approval",
    ) -> None:
        self.name = name
        self.module = module
        self.args = list(args)
        self.log_path = log_path
        self.port = port or unused_loopback_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    def launch(self) -> None:
        """Start the process without waiting for it to listen."""
        command = [sys.executable, "-m", self.module, *self.args, "--port", str(self.port)]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(  # noqa: S603 - our own interpreter and module, fixed arguments
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=os.environ.copy()
            )

    async def wait_listening(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Poll the port until it accepts connections; raise with the log tail if the process dies first.

        Asynchronous, so Ctrl-C while servers start interrupts the wait at once.
        """
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                code = None if self.process is None else self.process.returncode
                raise RuntimeError(f"{self.name} exited with {code} before listening:\n{self.log_tail()}")
            try:
                _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", self.port), 0.5)
            except (OSError, TimeoutError):
                await asyncio.sleep(0.05)
                continue
            writer.close()
            await writer.wait_closed()
            return
        raise RuntimeError(f"{self.name} did not listen on {self.port} within {timeout_s:.0f}s:\n{self.log_tail()}")

    async def start(self) -> None:
        """Launch and wait until it listens."""
        self.launch()
        await self.wait_listening()

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs (scenario 8's crash, and the final cleanup)."""
        self.signal_kill()
        if self.process is not None:
            self.process.wait(10)

    def signal_kill(self) -> None:
        """Send SIGKILL without waiting for the process to end (safe inside a signal handler)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)

    def log_tail(self, chars: int = 2000) -> str:
        """The end of the process's log."""
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""


def count_ledger(path: Path, **match: Any) -> int:
    """Entries of the fsynced ledger file whose fields equal ``match`` (works while the server is down)."""
    if not path.exists():
        return 0
    count = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            entry = json.loads(line)
            count += all(entry.get(key) == value for key, value in match.items())
    return count


def remove_tree(path: Path) -> None:
    """Remove a scratch folder, ignoring what is already gone."""
    shutil.rmtree(path, ignore_errors=True)
