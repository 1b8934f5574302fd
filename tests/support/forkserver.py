"""A warm process that forks the test servers, so a start skips importing the MCP SDK.

Importing ``mcp_approval`` and the SDK costs a server about 2.5 s of CPU, most of it building the
SDK's pydantic models; the crash tests alone start about 500 servers. The fork server imports
all that once, then forks a child per start. Each child is a real, separate process with its own
pid, environment, working directory and log: it runs ``python -m MODULE ARGS`` through
:mod:`tests.support.dump_on_signal`, can be signalled (SIGKILL included) and exits with its own
code, which the fork server reports. A test sees it through :class:`ForkedProcess`, which answers
like :class:`subprocess.Popen` (``pid``, ``poll``, ``wait``, ``send_signal``, ``returncode``).

The fork server is single-threaded (a child forked from a threaded parent may inherit a held
lock); it learns of exits from ``SIGCHLD`` through a wake-up socket. A child whose test process
went away (its connection closed) is killed, so no server outlives the test run.
``MCP_APPROVAL_TEST_FORKSERVER=0`` turns the fork server off: servers then start as plain
subprocesses.

Usage (by the test support, not by tests): ``python -m tests.support.forkserver SOCKET_PATH``.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

__all__ = ["ForkedProcess", "enabled", "spawn", "start_module"]

SWITCH = "MCP_APPROVAL_TEST_FORKSERVER"
#: What every server imports, loaded once in the fork server.
WARM_MODULES = (
    "mcp",
    "mcp.server.mcpserver",
    "mcp.client",
    "uvicorn",
    "sqlalchemy",
    "alembic.operations",
    "mcp_approval.cli.main",
    "mcp_approval.cli.serve",
    "mcp_approval.config",
    "mcp_approval.server",
    "mcp_approval.testing.tasks_demo",
    "mcp_approval.cli.arap_server",
    "mcp_approval.reference.server",
    "tests.support.dump_on_signal",
)


# -- the fork server ------------------------------------------------------------------------------


def _serve(path: str) -> None:
    for name in WARM_MODULES:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    wake_read, wake_write = socket.socketpair()
    wake_write.setblocking(False)
    signal.set_wakeup_fd(wake_write.fileno())
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wake-up byte is written
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(wake_read, selectors.EVENT_READ, "child")
    children: dict[int, socket.socket] = {}  # pid -> the connection that asked for it
    print("ready", flush=True)
    while True:
        for key, _ in selector.select():
            if key.data == "accept":
                connection, _ = listener.accept()
                selector.register(connection, selectors.EVENT_READ, "request")
            elif key.data == "child":
                with contextlib.suppress(BlockingIOError):
                    wake_read.recv(4096)
                _reap(children)
            else:
                connection = key.fileobj
                assert isinstance(connection, socket.socket)
                _on_request(connection, selector, children, (listener, wake_read, wake_write))


def _on_request(
    connection: socket.socket,
    selector: selectors.BaseSelector,
    children: dict[int, socket.socket],
    inherited: Sequence[socket.socket],
) -> None:
    """A start request (one JSON line), or the end of a test process's connection."""
    data = _read_line(connection)
    if data is None:  # the test process is gone: so are its servers
        selector.unregister(connection)
        for pid, owner in list(children.items()):
            if owner is connection:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        connection.close()
        return
    request = json.loads(data)
    pid = os.fork()
    if pid == 0:
        _child(request, [connection, *inherited, *children.values()])
    children[pid] = connection
    connection.sendall(json.dumps({"pid": pid}).encode() + b"\n")


def _read_line(connection: socket.socket) -> bytes | None:
    chunks = []
    while True:
        chunk = connection.recv(65536)
        if not chunk:
            return None
        chunks.append(chunk)
        if chunk.endswith(b"\n"):
            return b"".join(chunks)


def _reap(children: dict[int, socket.socket]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        connection = children.pop(pid, None)
        code = os.waitstatus_to_exitcode(status)
        if connection is not None:
            with contextlib.suppress(OSError):
                connection.sendall(json.dumps({"exit": code, "pid": pid}).encode() + b"\n")


def _child(request: dict[str, Any], inherited: Sequence[socket.socket]) -> NoReturn:
    """In the forked child: become the requested server process.

    It never returns to the fork server's loop: the server's own exit (or exception) ends the
    process through the interpreter's usual shutdown, so its ``atexit`` handlers and threads are
    seen to as in any ``python -m`` run.
    """
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for sock in inherited:
        sock.close()
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    from tests.support import dump_on_signal

    sys.argv = ["dump_on_signal", *request["argv"]]
    dump_on_signal.main()
    sys.exit(0)


# -- the test side --------------------------------------------------------------------------------


class _ForkServer:
    """This test process's fork server, started on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._path: str | None = None
        self._process: subprocess.Popen[bytes] | None = None

    def path(self) -> str:
        with self._lock:
            if self._path is None or self._process is None or self._process.poll() is not None:
                self._path = self._start()
            return self._path

    def _start(self) -> str:
        path = str(Path(tempfile.mkdtemp(prefix="forkserver-")) / "socket")
        command = [sys.executable, "-m", "tests.support.forkserver", path]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        assert process.stdout is not None
        line = process.stdout.readline()
        if line.strip() != b"ready":
            process.kill()
            raise RuntimeError(f"the test fork server did not start (it said {line!r})")
        self._process = process
        atexit.register(process.kill)
        return path


_FORK_SERVER = _ForkServer()


def enabled() -> bool:
    """Whether test servers start through the fork server (``MCP_APPROVAL_TEST_FORKSERVER``, default on)."""
    return os.environ.get(SWITCH, "1") != "0"


class ForkedProcess:
    """A server process forked by the fork server, answering like :class:`subprocess.Popen`."""

    def __init__(self, connection: socket.socket, pid: int, args: list[str]) -> None:
        self._connection = connection
        self.pid = pid
        self.args = args
        self.returncode: int | None = None
        self._buffer = b""

    def poll(self) -> int | None:
        """The exit code once the process ended, else ``None`` (does not block)."""
        if self.returncode is None:
            self._receive(timeout_s=0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the process to end; :class:`subprocess.TimeoutExpired` after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            self._receive(timeout_s=left)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        """Signal the process, unless it has already been reaped."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def kill(self) -> None:
        """SIGKILL."""
        self.send_signal(signal.SIGKILL)

    def _receive(self, *, timeout_s: float | None) -> None:
        if b"\n" not in self._buffer:
            self._connection.settimeout(timeout_s)
            try:
                chunk = self._connection.recv(4096)
            except (TimeoutError, BlockingIOError):
                return
            if not chunk:  # the fork server died, and its children with it (or they are orphans now)
                self.returncode = -signal.SIGKILL
                return
            self._buffer += chunk
        if b"\n" in self._buffer:
            message = json.loads(self._buffer.split(b"\n", 1)[0])
            self.returncode = int(message["exit"])
            self._connection.close()


def spawn(argv: list[str], *, env: dict[str, str], log_path: Path, cwd: Path | None = None) -> ForkedProcess:
    """Start ``python -m tests.support.dump_on_signal`` with ``argv`` (module first) from the fork server."""
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(_FORK_SERVER.path())
    request = {"argv": argv, "env": env, "log": str(log_path), "cwd": str(cwd or Path.cwd())}
    connection.sendall(json.dumps(request).encode() + b"\n")
    received = b""
    while b"\n" not in received:
        chunk = connection.recv(4096)
        if not chunk:
            raise RuntimeError("the test fork server closed the connection before starting the process")
        received += chunk
    reply, rest = received.split(b"\n", 1)
    process = ForkedProcess(connection, int(json.loads(reply)["pid"]), ["python", "-m", *argv])
    process._buffer = rest  # the exit, when the process ended at once
    return process


def start_module(argv: list[str], *, env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes] | ForkedProcess:
    """``python -m`` ``argv`` (module first), output appended to ``log_path``: forked when :func:`enabled`."""
    if enabled():
        return spawn(argv, env=env, log_path=log_path)
    command = [sys.executable, "-m", "tests.support.dump_on_signal", *argv]
    with log_path.open("ab") as log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)


if __name__ == "__main__":
    _serve(sys.argv[1])
