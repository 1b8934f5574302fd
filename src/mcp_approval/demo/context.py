"""What every scenario gets: the running servers, the ledger, the narrator, and narrated client steps."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp import Client
from mcp.client.extension import ClientExtension
from mcp.client.session import ElicitationFnT

from mcp_approval.client import CreateTaskResult, TasksClient
from mcp_approval.demo.clients import (
    Reviewer,
    disposition_of,
    envelope_of,
    mcp_client,
    reviewer_http,
    short,
    text_of,
    until,
)
from mcp_approval.demo.mail_inbox import MailInbox
from mcp_approval.demo.narration import Narrator
from mcp_approval.demo.oidc_issuer import DemoIssuer
from mcp_approval.demo.servers import ServerProcess, count_ledger
from mcp_approval.demo.slack_standin import SlackStandIn
from mcp_approval.demo.teams_inbox import WorkflowInbox
from mcp_approval.demo.webhooks import WebhookInbox
from mcp_approval.errors import MCPApprovalError

__all__ = ["METRICS_TOKEN", "TOKENS", "Demo", "ScenarioFailed", "ScenarioState", "describe", "is_task"]

#: The demo deployment's static bearer tokens (its ``[[principals]]``).
TOKENS = {name: f"{name}-token" for name in ("alice", "bob", "carol", "dave", "erin")}
#: The scraper's token of the demo deployment's ``[metrics]`` (a demo value, like the tokens above).
METRICS_TOKEN = "metrics-token"  # noqa: S105 (demo-only, as in config.toml)
#: Outcome states a request's call is still on its way through (the reviewer API may lag the client briefly).
_UNSETTLED = frozenset({"pending", "running"})
#: How long the reviewer API may take to show the outcome the client already read.
OUTCOME_WAIT_S = 10.0


class ScenarioFailed(MCPApprovalError):
    """An expectation of the scenario did not hold; the message says which."""


@dataclass
class ScenarioState:
    """What a scenario reports besides pass/fail: the disposition it read and which ledger entries are its own."""

    disposition: str | None = None
    ledger_match: dict[str, Any] = field(default_factory=dict)
    ledger_file: Path | None = None

    def watch(self, **match: Any) -> None:
        """Count the treasury ledger's entries with these fields as this scenario's executions."""
        self.ledger_match = match

    def watch_file(self, path: Path) -> None:
        """Count every entry of another ledger file (a server of the scenario's own) instead."""
        self.ledger_file = path

    def executions(self, treasury_ledger: Path) -> int:
        """The executions this scenario left, read from its ledger file."""
        if self.ledger_file is not None:
            return count_ledger(self.ledger_file)
        return count_ledger(treasury_ledger, **self.ledger_match) if self.ledger_match else 0


@dataclass
class Demo:
    """The demo's running world, shared by the scenarios."""

    narrator: Narrator
    treasury: ServerProcess
    config_path: Path
    run_id: str
    extra: dict[str, ServerProcess] = field(default_factory=dict)
    #: Where the deployment's webhook notifications arrive (scenario 14).
    inbox: WebhookInbox | None = None
    #: The stand-in of Slack's Web API (scenario 17) and of a Teams workflow (scenario 18).
    slack: SlackStandIn | None = None
    teams: WorkflowInbox | None = None
    mail: MailInbox | None = None
    #: The demo's OpenID Connect issuer the console signs reviewers in with (scenario 21).
    issuer: DemoIssuer | None = None

    @property
    def ledger_path(self) -> Path:
        """The treasury tools' fsynced ledger file."""
        return self.config_path.parent / "ledger.jsonl"

    @property
    def scratch(self) -> Path:
        """The demo's temporary folder."""
        return self.config_path.parent.parent

    def account(self, scenario: int) -> str:
        """An account name no other scenario or earlier run uses (a shared ``--db`` may hold old requests)."""
        return f"acct-{self.run_id}-{scenario}"

    def executions(self, **match: Any) -> int:
        """Ledger entries with these fields."""
        return count_ledger(self.ledger_path, **match) if match else 0

    def executions_in(self, ledger: Path, **match: Any) -> int:
        """Entries of another ledger file with these fields."""
        return count_ledger(ledger, **match)

    def expect(self, ok: bool, text: str) -> None:
        """Narrate one expectation; raise :class:`ScenarioFailed` when it does not hold."""
        self.narrator.check(ok, text)
        if not ok:
            raise ScenarioFailed(text)

    @asynccontextmanager
    async def client(
        self,
        who: str,
        *,
        extensions: Sequence[ClientExtension] = (),
        elicitation_callback: ElicitationFnT | None = None,
        base_url: str | None = None,
    ) -> AsyncIterator[Client]:
        """An MCP client acting as ``who`` (its static token) on the treasury server."""
        async with mcp_client(
            base_url or self.treasury.base_url,
            TOKENS[who],
            extensions=extensions,
            elicitation_callback=elicitation_callback,
        ) as client:
            yield client

    @asynccontextmanager
    async def reviewers(self, *names: str, base_url: str | None = None) -> AsyncIterator[list[Reviewer]]:
        """Named reviewers on the reviewer API."""
        async with reviewer_http(base_url or self.treasury.base_url) as http:
            yield [Reviewer(http, name, TOKENS[name]) for name in names]

    async def call(self, client: Client, who: str, tool: str, arguments: dict[str, Any]) -> Any:
        """``tools/call`` with the raw answer (a ``CreateTaskResult`` stays unresolved), narrated."""
        self.narrator.call(who, f"tools/call {tool} {json.dumps(arguments)}")
        result = await client.session.call_tool(tool, arguments, allow_claimed=True)
        self.narrator.got(describe(result))
        return result

    async def decide(self, reviewer: Reviewer, record: dict[str, Any], decision: str, *, expect: int = 200) -> None:
        """``POST /approvals/{id}/decide`` as ``reviewer``, narrated; the status must be ``expect``."""
        self.narrator.call(reviewer.name, f"POST /approvals/{record['id'][:8]}…/decide {{'decision': '{decision}'}}")
        response = await reviewer.decide(record["id"], decision, comment=f"demo: {decision}")
        if response.status_code == 200:
            status = response.json()["status"]
            self.narrator.decided(reviewer.name, f"{decision} → request {status}")
        else:
            self.narrator.got(f"HTTP {response.status_code} {short(_problem_detail(response.text), 80)}")
        self.expect(response.status_code == expect, f"the reviewer API answered {response.status_code}")

    async def outcome(self, reviewer: Reviewer, record: dict[str, Any], state: str) -> dict[str, Any]:
        """``GET /approvals/{id}`` as ``reviewer`` until the call's outcome is settled, narrated as the
        console's Outcome section shows it; it must be ``state``."""
        self.narrator.call(reviewer.name, f"GET /approvals/{record['id'][:8]}… (what happened to the call?)")
        shown = await until(
            lambda: reviewer.request(record["id"]),
            lambda body: bool(body.get("outcome")) and body["outcome"]["state"] not in _UNSETTLED,
            timeout_s=OUTCOME_WAIT_S,
            what="the request's outcome",
        )
        outcome: dict[str, Any] = shown["outcome"]
        self.narrator.got(
            f"outcome {outcome['state']}: {outcome['text']}" + (f" at {outcome['at']}" if outcome["at"] else "")
        )
        self.expect(outcome["state"] == state, f"the reviewer sees {state}")
        return outcome

    async def wait(self, tasks: TasksClient, client: Client, who: str, task_id: str) -> types.CallToolResult:
        """Poll the task to its end with ``tasks/get`` (as :class:`TasksClient` does), narrated."""
        self.narrator.call(who, f"tasks/get {task_id[:8]}… (polling until terminal)")
        result = await tasks.wait(client.session, task_id)
        self.narrator.got(describe(result))
        return result


def _problem_detail(body: str) -> str:
    """The ``detail`` of a problem+json body, or the body itself."""
    try:
        document = json.loads(body)
    except ValueError:
        return body
    return str(document.get("detail", body)) if isinstance(document, dict) else body


def describe(result: Any) -> str:
    """One line about a ``tools/call`` or resolved task result."""
    if isinstance(result, CreateTaskResult):
        envelope = envelope_of(result)
        return f"CreateTaskResult {result.status} (task {result.task_id[:8]}…), envelope {envelope or 'none'}"
    if isinstance(result, types.CallToolResult):
        kind = "isError" if result.is_error else "ok"
        parts = [f"CallToolResult {kind}"]
        disposition = disposition_of(result)
        if disposition:
            parts.append(f"disposition {disposition}")
        envelope = envelope_of(result)
        if envelope:
            parts.append(f"envelope {envelope}")
        return ", ".join(parts) + f": {short(text_of(result))}"
    return f"{type(result).__name__}"


def is_task(result: Any, status: str = "working") -> bool:
    """Whether ``result`` is a ``CreateTaskResult`` in ``status``."""
    return isinstance(result, CreateTaskResult) and result.status == status
