"""What the examples in this folder share: the command line, the run's state directory, the scripted model's call.

Every example takes ``--url URL --token TOKEN --state DIR [--scripted] start "PROMPT"`` or
``... resume``. ``DIR`` holds the call journal (``calls.sqlite3``), the framework's own saved state
and, once the run finished, ``finished.json`` with the tool's result text.
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Options", "finished", "options", "record_finished", "scripted_call"]


@dataclass(frozen=True)
class Options:
    """The parsed command line."""

    url: str
    token: str
    state: Path
    scripted: bool
    command: str
    prompt: str

    @property
    def journal(self) -> Path:
        """The durable call journal of this run."""
        return self.state / "calls.sqlite3"


def options(description: str) -> Options:
    """Parse the command line shared by the examples; the state directory is created."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--url", required=True, help="the MCP server's URL (…/mcp)")
    parser.add_argument("--token", required=True, help="the bearer token the agent calls with")
    parser.add_argument("--state", required=True, type=Path, help="where the paused run is kept")
    parser.add_argument("--scripted", action="store_true", help="the framework's test model instead of an LLM")
    parser.add_argument("command", choices=["start", "resume"])
    parser.add_argument("prompt", nargs="?", default="")
    parsed = parser.parse_args()
    if parsed.command == "start" and not parsed.prompt:
        parser.error("start needs a PROMPT")
    parsed.state.mkdir(parents=True, exist_ok=True)
    return Options(parsed.url, parsed.token, parsed.state, parsed.scripted, parsed.command, parsed.prompt)


def scripted_call(prompt: str) -> tuple[str, dict[str, Any]]:
    """The tool call the scripted model makes for ``prompt``: "send 30000 to acme" → ``wire_transfer``."""
    amount = re.search(r"\$?(\d[\d,]*(?:\.\d+)?)", prompt)
    account = re.search(r"\bto\s+([A-Za-z0-9_.-]+)", prompt)
    if amount is None or account is None:
        raise SystemExit(f"the scripted model wants 'send AMOUNT to ACCOUNT', got {prompt!r}")
    return "wire_transfer", {"to": account.group(1), "amount": float(amount.group(1).replace(",", ""))}


def finished(state: Path) -> str | None:
    """The result text of a run that already finished, if it did."""
    path = state / "finished.json"
    return json.loads(path.read_text())["result"] if path.exists() else None


def record_finished(state: Path, result: str, messages: Any) -> None:
    """Keep the finished run's result text and the model's messages (``finished.json``)."""
    (state / "finished.json").write_text(json.dumps({"result": result, "messages": messages}, indent=2))
