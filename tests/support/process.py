"""Server subprocesses on 127.0.0.1 for crash, restart and multi-worker tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mcp_approval.hosts import unused_loopback_port
from tests.support import forkserver
from tests.support.timing import scaled


class ServerProcess:
    """``python -m mcp_approval.testing.tasks_demo`` in a subprocess."""

    def __init__(self, db_url: str, *, log_path: Path, extra_args: list[str] | None = None) -> None:
        self.db_url = db_url
        self.port = unused_loopback_port()
        self.log_path = log_path
        self.extra_args = extra_args or []
        self.process: subprocess.Popen[bytes] | forkserver.ForkedProcess | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float | None = None) -> None:
        """Start the server and wait until it listens (up to ``timeout_s``; by default ``scaled(60)``)."""
        arguments = ["mcp_approval.testing.tasks_demo", "--port", str(self.port), "--db", self.db_url, *self.extra_args]
        self.process = forkserver.start_module(arguments, env=os.environ.copy(), log_path=self.log_path)
        limit_s = scaled(60) if timeout_s is None else timeout_s
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}: {self.log_path.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"server did not listen within {limit_s:.0f}s: {self.log_path.read_text()[-2000:]}")

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(scaled(10))

    def terminate(self) -> int:
        """SIGTERM: a graceful shutdown; returns the exit code."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            return self.process.wait(scaled(20))
        return self.process.returncode

    def restart(self) -> None:
        self.kill()
        self.start()


@contextmanager
def running(db_url: str, tmp_path: Path, *args: str, name: str = "server") -> Iterator[ServerProcess]:
    server = ServerProcess(db_url, log_path=tmp_path / f"{name}.log", extra_args=list(args))
    server.start()
    try:
        yield server
    finally:
        server.kill()
