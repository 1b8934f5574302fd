"""Running the demo: start the servers, drive the selected scenarios, report, clean up."""

from __future__ import annotations

import asyncio
import functools
import logging
import secrets
import signal
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from mcp_approval.demo.catalog import SCENARIOS, ScenarioSpec
from mcp_approval.demo.context import METRICS_TOKEN, TOKENS, Demo, ScenarioState
from mcp_approval.demo.mail_inbox import MailInbox, point_mail_at
from mcp_approval.demo.narration import Narrator, Outcome, ScenarioResult, results_json
from mcp_approval.demo.oidc_issuer import ISSUER_ADDRESS, DemoIssuer
from mcp_approval.demo.scenarios import open_request
from mcp_approval.demo.scenarios_chat import SLACK_ADDRESS, demo_slack
from mcp_approval.demo.scenarios_sign_in import ISSUER_ROLES
from mcp_approval.demo.servers import ServerProcess, materialize, point_at, remove_tree
from mcp_approval.demo.services import start_services
from mcp_approval.demo.stores import DemoStores, demo_stores, drop_schemas, make_schemas
from mcp_approval.demo.teams_inbox import TEAMS_ADDRESS, WorkflowInbox
from mcp_approval.demo.webhooks import WEBHOOK_ADDRESS, WebhookInbox

__all__ = ["DemoOptions", "parse_only", "run_demo"]

#: The last line ``--keep-running`` prints once the servers are ready for use.
KEEP_RUNNING_LINE = "servers are running; press Ctrl-C to stop them"
#: The most one scenario may take before it is reported as failed.
SCENARIO_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class DemoOptions:
    """The ``mcp-approval demo`` options."""

    db_url: str | None = None
    only: frozenset[int] | None = None
    as_json: bool = False
    keep_running: bool = False


def parse_only(value: str | None) -> frozenset[int] | None:
    """``"2,8"`` → ``{2, 8}``; ``None`` or empty means every scenario.

    Raises:
        ValueError: a part is not a scenario number, naming it and the valid range.
    """
    if value is None or not value.strip():
        return None
    known = {spec.number for spec in SCENARIOS}
    chosen: set[int] = set()
    for part in value.split(","):
        text = part.strip()
        if not text.isdigit() or int(text) not in known:
            choices = ", ".join(str(number) for number in sorted(known))
            raise ValueError(f"{text!r} is not a scenario number; choose from {choices} (e.g. --only 2,8)")
        chosen.add(int(text))
    return frozenset(chosen)


def run_demo(options: DemoOptions, console: Console | None = None) -> int:
    """Run the demo; the exit code is 0 only if every selected scenario behaved."""
    for name in ("httpx2", "httpx", "mcp", "mcp_approval"):
        logging.getLogger(name).setLevel(logging.ERROR)
    narrator = Narrator(None if options.as_json else (console or Console()))
    scratch = Path(tempfile.mkdtemp(prefix="mcp-approval-demo-"))
    stores = demo_stores(options.db_url, f"sqlite:///{scratch / 'treasury' / 'treasury.db'}")
    servers: list[ServerProcess] = []
    codes: list[int] = []
    # Ctrl-C and SIGTERM stop the servers first, then unwind: whatever the demo's clients still
    # wait on (a stream being closed, an async generator finalized) then fails at once instead of
    # waiting on a server that is about to be killed anyway.
    stopping = functools.partial(_stop_servers_then_interrupt, servers)
    previous = {number: signal.signal(number, stopping) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        asyncio.run(_run(options, stores, narrator, scratch, servers, codes))
    except KeyboardInterrupt:
        narrator.banner("stopping the servers")
        return codes[0] if codes else 130
    finally:
        for server in servers:
            server.kill()
        # After the servers are gone: none of them holds a lock on the tables being dropped.
        _drop_schemas(stores)
        remove_tree(scratch)
        for number, handler in previous.items():
            signal.signal(number, handler)
    return codes[0] if codes else 1


def _drop_schemas(stores: DemoStores) -> None:
    try:
        asyncio.run(drop_schemas(stores))
    except Exception as exc:  # the verdict stands; the operator is told (on stderr, even under --json) what is left
        sys.stderr.write(f"mcp-approval demo: could not drop its schemas {', '.join(stores.schemas)}: {exc}\n")


def _stop_servers_then_interrupt(servers: list[ServerProcess], signum: int, frame: object) -> None:
    for server in servers:
        server.signal_kill()
    raise KeyboardInterrupt


async def _run(
    options: DemoOptions,
    stores: DemoStores,
    narrator: Narrator,
    scratch: Path,
    servers: list[ServerProcess],
    codes: list[int],
) -> None:
    started = time.monotonic()
    selected = [spec for spec in SCENARIOS if options.only is None or spec.number in options.only]
    config_path = materialize(scratch / "treasury")
    needs = frozenset(need for spec in selected for need in spec.needs)
    narrator.banner(f"mcp-approval demo: {len(selected)} scenario(s), deployment {config_path.parent}")
    inbox = WebhookInbox().start()  # the deployment's notifications arrive here
    slack, teams = demo_slack().start(), WorkflowInbox().start()  # and its Slack and Teams messages here
    mail = MailInbox().start()  # and its e-mail here
    point_mail_at(config_path, mail.port)
    issuer = DemoIssuer(ISSUER_ROLES).start()  # the console signs reviewers in here (scenario 21)
    addresses = {WEBHOOK_ADDRESS: inbox.port, SLACK_ADDRESS: slack.port, TEAMS_ADDRESS: teams.port}
    point_at(config_path, {**addresses, ISSUER_ADDRESS: issuer.port})
    try:
        try:
            await make_schemas(stores)
            treasury, extra = await start_services(config_path, stores, scratch, needs, servers, narrator)
        except Exception as exc:  # the servers did not come up: every scenario fails, saying why
            results = [_failed(spec, f"servers did not start: {exc}") for spec in selected]
            codes.append(_report(options, narrator, results, started))
            return
        narrator.info(f"   webhook receiver listening at http://{WEBHOOK_ADDRESS.split(':')[0]}:{inbox.port}/hook")
        narrator.info(f"   Slack stand-in at {slack.api_url}, Teams workflow stand-in on port {teams.port}")
        narrator.info(f"   SMTP server on port {mail.port}")
        demo = Demo(narrator, treasury, config_path, secrets.token_hex(3), extra, inbox, slack, teams, mail, issuer)
        results = [await _run_one(demo, spec) for spec in selected]
        codes.append(_report(options, narrator, results, started))
        if options.keep_running:
            await _keep_running(demo, stores.treasury)
    finally:
        inbox.stop()
        slack.stop()
        teams.stop()
        mail.stop()
        issuer.stop()


async def _run_one(demo: Demo, spec: ScenarioSpec) -> ScenarioResult:
    demo.narrator.scenario(spec.number, spec.name, spec.expectation)
    state = ScenarioState()
    started = time.monotonic()
    outcome: Outcome
    try:
        detail = await asyncio.wait_for(spec.run(demo, state), SCENARIO_TIMEOUT_S)
        outcome = "pass"
    except TimeoutError:
        detail, outcome = f"did not finish within {SCENARIO_TIMEOUT_S:.0f} s", "fail"
    except Exception as exc:  # a scenario that misbehaves is reported, never raised
        detail, outcome = _why(exc), "fail"
    executions = state.executions(demo.ledger_path)
    seconds = round(time.monotonic() - started, 2)
    result = ScenarioResult(spec.number, spec.name, outcome, state.disposition, executions, detail, seconds)
    demo.narrator.outcome(result)
    return result


def _why(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]  # a scenario's concurrent steps: the first failure says why
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())[:300]


def _failed(spec: ScenarioSpec, detail: str) -> ScenarioResult:
    return ScenarioResult(spec.number, spec.name, "fail", None, 0, " ".join(detail.split())[:300], 0.0)


def _report(options: DemoOptions, narrator: Narrator, results: Iterable[ScenarioResult], started: float) -> int:
    ordered = list(results)
    if options.as_json:
        sys.stdout.write(results_json(ordered) + "\n")
        sys.stdout.flush()
    else:
        narrator.summary(ordered, time.monotonic() - started)
    return 0 if ordered and all(result.outcome == "pass" for result in ordered) else 1


async def _keep_running(demo: Demo, db_url: str) -> None:
    """Leave the servers up and say how to use them, until Ctrl-C (stderr under ``--json``: stdout stays JSON)."""
    url, config = demo.treasury.base_url, demo.config_path
    try:
        request_id = await open_request(demo)
        pending = f"waiting for you:       alice's $75,000 wire_transfer, approval {request_id}"
    except Exception as exc:  # the servers still serve; only the example request is missing
        request_id, pending = "ID", f"(could not open an example request: {exc})"
    lines = [
        "",
        f"MCP (streamable HTTP): {url}/mcp",
        f"reviewer console:      {url}/console   (sign in with a reviewer token, e.g. carol-token)",
        f"reviewer API:          {url}/approvals",
        "bearer tokens:         " + ", ".join(f"{name}={token}" for name, token in TOKENS.items()),
        f"pending approvals:     mcp-approval review list --config {config} --db {db_url}",
        pending,
        f"decide it:             mcp-approval review approve {request_id} --as carol --config {config} --db {db_url}",
        f"or over HTTP:          curl -s {url}/approvals -H 'authorization: Bearer carol-token'",
        f"metrics (Prometheus):  curl -s {url}/metrics -H 'authorization: Bearer {METRICS_TOKEN}'",
        *(f"{server.name}: {server.base_url}" for server in demo.extra.values()),
        KEEP_RUNNING_LINE,
    ]
    out = sys.stderr if demo.narrator.console is None else sys.stdout
    out.write("\n".join(lines) + "\n")
    out.flush()
    await asyncio.Event().wait()
