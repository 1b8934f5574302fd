"""The SEP server as a real process on 127.0.0.1, and the kit's options for one of its instances."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from mcp_approval.checks import CheckOptions
from mcp_approval.hosts import unused_loopback_port
from tests.support import forkserver
from tests.support.timing import scaled

OUTSIDE = Path(__file__).with_name("fixture_outside.py")
#: The kit's settle window against the SEP server, which acts on a decision at once.
SETTLE_S = 0.3


class ServerProcess:
    """``python -m MODULE ARGS --port P`` on a free port, until :meth:`kill`."""

    def __init__(self, module: list[str], log_path: Path) -> None:
        self.port = unused_loopback_port()
        self.process = forkserver.start_module(
            [*module, "--port", str(self.port)], env=dict(os.environ), log_path=log_path
        )
        self.log_path = log_path
        deadline = time.monotonic() + scaled(60)
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"{module[0]} exited: {log_path.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{module[0]} did not listen: {log_path.read_text()[-2000:]}") from None
                time.sleep(0.05)

    @property
    def url(self) -> str:
        """The MCP endpoint (of a server serving one)."""
        return f"http://127.0.0.1:{self.port}/mcp"

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(scaled(10))


class SepServer(ServerProcess):
    """``python -m tests.checks.sep_server``; :meth:`instance` makes a fresh server in it."""

    def __init__(self, log_path: Path) -> None:
        super().__init__(["tests.checks.sep_server"], log_path)

    def instance(self, **settings: Any) -> str:
        """A new instance with ``settings`` (a mutant's name under ``mutant``); its base URL."""
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/instances",
            data=json.dumps(settings).encode(),
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=scaled(10)) as response:
            return f"http://127.0.0.1:{self.port}/i/{json.loads(response.read())['id']}"


def outside(base: str, *words: str) -> list[str]:
    """``fixture_outside.py`` for the instance at ``base``, as an argv template."""
    return [sys.executable, "-I", "-S", str(OUTSIDE), base, *words]


def kit_options(base: str, settings: dict[str, Any], **changes: Any) -> CheckOptions:
    """Everything the kit can be told about an instance of the SEP server (with ``settings``)."""
    options: dict[str, Any] = {
        "url": f"{base}/mcp",
        "tool": "pay",
        "arguments": {"to": "acct-{nonce}", "amount": 300},
        "changed_arguments": {"to": "acct-{nonce}", "amount": 900},
        "denied_arguments": {"to": "acct-{nonce}", "amount": -5},
        "failing_arguments": {"to": "fail-{nonce}", "amount": 300},
        "token": "one-token",
        "other_token": "two-token",
        "underscoped_token": "three-token",
        "decide_command": outside(base, "decide", "{decision}", "{arguments}", "{reviewer}", "{comment}"),
        "reviewer": "carol",
        "policy_command": outside(base, "policy", "{action}", "{token}", "{arguments}"),
        "witness_tool": "ledger",
        "expects_input": settings.get("inputs", "during") != "none",
        "expires_within_s": settings.get("expire_s"),
        "settle_s": SETTLE_S,
        "timeout_s": 10.0,
    }
    options.update(changes)
    return CheckOptions(**options)
