"""The kit as the Access Request Service: the reference ``arap-server`` run for the length of a check.

A server bound to an AuthZEN ARAP backend submits its approval requests to the Access Request
Service its PDP names. Pointed at the kit's port instead of its usual one, it submits them to the
reference PDP + ARS (``mcp-approval arap-server``) that the kit starts from the operator's file
and decides on itself, as ``review`` does on that file. The service's URL is a backend artifact:
it must never reach the client.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from mcp_approval.checks.options import CheckInputError

__all__ = ["ANNOUNCEMENT", "served_access_request_service"]

#: What ``arap-server`` prints once it accepts connections (the URL follows).
ANNOUNCEMENT = "arap-server listening on "
_START_TIMEOUT_S = 60.0
_LOG_TAIL_CHARS = 600


@contextmanager
def served_access_request_service(config: Path, port: int) -> Iterator[str]:
    """Run ``mcp-approval arap-server --config CONFIG --port PORT`` until the block ends; yield its URL.

    Raises:
        CheckInputError: the file does not exist, or the service exits or stays silent instead of
            listening (the line quotes the end of its log).
    """
    if not config.is_file():
        raise CheckInputError(f"--serve-ars {config}: no such file")
    command = [sys.executable, "-m", "mcp_approval", "arap-server", "--config", str(config), "--port", str(port)]
    with tempfile.TemporaryFile() as log:
        service = subprocess.Popen(  # noqa: S603 - our own interpreter and module, the operator's file
            command, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, env=os.environ.copy()
        )
        try:
            yield _listening_url(service, log, config)
        finally:
            service.terminate()
            try:
                service.wait(10)
            except subprocess.TimeoutExpired:
                service.kill()
                service.wait(10)


def _listening_url(service: subprocess.Popen[bytes], log: IO[bytes], config: Path) -> str:
    """The URL the service announces on its standard output once it listens."""
    assert service.stdout is not None
    deadline = time.monotonic() + _START_TIMEOUT_S
    while (remaining := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([service.stdout], [], [], remaining)
        line = service.stdout.readline().decode(errors="replace").strip() if ready else ""
        if line.startswith(ANNOUNCEMENT):
            return line.removeprefix(ANNOUNCEMENT)
        if ready and not line and service.poll() is not None:
            break  # the service exited before it listened
    service.kill()
    service.wait(10)
    raise CheckInputError(f"--serve-ars {config}: arap-server did not listen: {_tail(log)}")


def _tail(log: IO[bytes]) -> str:
    log.seek(0)
    text = log.read().decode(errors="replace")
    return " ".join(text.split())[-_LOG_TAIL_CHARS:] or "(no output)"
