"""The test fork server: its children behave as the subprocesses they stand in for."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support import forkserver
from tests.support.timing import scaled

PROBE = "tests.support.forkserver_probe"


def logged(log: Path, text: str) -> None:
    """Wait until ``text`` is in ``log`` (up to ``scaled(30)``)."""
    limit_s = scaled(30)
    deadline = time.monotonic() + limit_s
    while not (log.exists() and text in log.read_text()):
        assert time.monotonic() < deadline, f"{text!r} not logged within {limit_s:.0f}s"
        time.sleep(0.02)


def test_a_child_has_its_own_pid_environment_directory_and_exit_code(tmp_path: Path) -> None:
    log = tmp_path / "probe.log"
    env = {**os.environ, "PROBE": "first"}
    process = forkserver.spawn([PROBE, "3"], env=env, log_path=log, cwd=tmp_path)
    assert process.wait(scaled(30)) == 3
    assert process.pid != os.getpid()
    assert log.read_text().strip() == f"pid={process.pid} cwd={tmp_path} probe=first"
    other = forkserver.spawn([PROBE, "0"], env={**os.environ, "PROBE": "second"}, log_path=log, cwd=tmp_path)
    assert other.wait(scaled(30)) == 0
    assert log.read_text().splitlines()[-1].endswith("probe=second")  # not the first child's environment


def test_a_signalled_child_reports_the_signal_and_wait_times_out_while_it_runs(tmp_path: Path) -> None:
    log = tmp_path / "probe.log"
    process = forkserver.spawn([PROBE, "0", "sleep"], env=dict(os.environ), log_path=log)
    logged(log, "pid=")
    assert process.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        process.wait(0.2)
    process.send_signal(signal.SIGKILL)
    assert process.wait(scaled(30)) == -signal.SIGKILL
    process.kill()  # a no-op once it has ended


def test_an_armed_crash_point_fires_in_a_forked_process_only(tmp_path: Path) -> None:
    """A crash point is read when reached, so the fork server's own environment does not arm it."""
    from mcp_approval.crashpoints import CRASH_ENV

    log = tmp_path / "probe.log"
    armed = forkserver.spawn([PROBE, "crash"], env={**os.environ, CRASH_ENV: "after_intent"}, log_path=log)
    assert armed.wait(scaled(30)) == -signal.SIGKILL
    unarmed = forkserver.spawn([PROBE, "crash"], env=dict(os.environ), log_path=log)
    assert unarmed.wait(scaled(30)) == 0
    assert log.read_text().count("survived") == 1
