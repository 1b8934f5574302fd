"""Scenario 8 (a crash and restart while pending) and scenario 11 (SEP-2643 credential remediation)."""

from __future__ import annotations

import json
from collections.abc import Generator
from typing import Any

import httpx2

from mcp_approval.client import AuthorizingCaller
from mcp_approval.client.denials import read_challenge
from mcp_approval.demo.clients import disposition_of, envelope_of, mcp_client
from mcp_approval.demo.context import Demo, ScenarioFailed, ScenarioState, describe, is_task
from mcp_approval.demo.credentials import READ, TRANSFER, WRITE, DemoIssuer
from mcp_approval.demo.narration import Narrator
from mcp_approval.demo.scenarios import LARGE, tasks_client
from mcp_approval.demo.services import NEED_CREDENTIALS
from mcp_approval.denials.models import AuthorizationRemediationHint
from mcp_approval.protocol import CHALLENGE_INSUFFICIENT_SCOPE, DISPOSITION_APPROVED_EXECUTED

__all__ = ["credential_remediation", "restart_while_pending"]


async def restart_while_pending(demo: Demo, state: ScenarioState) -> str:
    """8. SIGKILL the server while a task is pending; after a restart the client resumes with the taskId alone."""
    account = demo.account(8)
    state.watch(to=account)
    async with demo.client("alice", extensions=[tasks_client()]) as alice, demo.reviewers("carol") as (carol,):
        created = await demo.call(alice, "alice", "wire_transfer", {"to": account, "amount": LARGE})
        demo.expect(is_task(created), "a working task")
        await carol.find("wire_transfer", to=account)
    task_id = created.task_id  # everything the client keeps across the crash
    demo.narrator.note("the client closes its connection and keeps only the taskId")
    demo.treasury.kill()  # SIGKILL, then reap it: a few milliseconds
    demo.narrator.note(f"SIGKILL {demo.treasury.name} (pid {_pid(demo)}) with the task pending")
    await demo.treasury.start()
    demo.narrator.note(f"restarted on port {demo.treasury.port}, same store (pid {_pid(demo)})")
    tasks = tasks_client()
    async with demo.client("alice", extensions=[tasks]) as alice, demo.reviewers("carol") as (carol,):
        demo.narrator.call("alice (new connection)", f"tasks/get {task_id[:8]}…")
        task = await tasks.get(alice.session, task_id)
        demo.narrator.got(f"{task.status}")
        demo.expect(task.status == "working", "the task survived the crash, still working")
        demo.expect(demo.executions(to=account) == 0, "nothing ran")
        await demo.decide(carol, await carol.find("wire_transfer", to=account), "approve")
        result = await demo.wait(tasks, alice, "alice", task_id)
    state.disposition = disposition_of(result)
    demo.expect(state.disposition == DISPOSITION_APPROVED_EXECUTED, "disposition approved-executed")
    demo.expect(demo.executions(to=account) == 1, "exactly one ledger entry")
    return "killed and restarted while pending; resumed by taskId; ran once"


def _pid(demo: Demo) -> str:
    process = demo.treasury.process
    return str(process.pid) if process is not None else "?"


class StepUpAuth(httpx2.Auth):
    """Presents the current token; on a 403 ``insufficient_scope`` gets one with the named scopes and resends.

    This is what an OAuth client's step-up does (``mcp_approval.client.oauth_client`` wraps the
    SDK's); here :class:`DemoIssuer` stands in for the authorization server.
    """

    def __init__(self, token: str, issuer: DemoIssuer, narrator: Narrator) -> None:
        self.token = token
        self.issuer = issuer
        self.narrator = narrator
        self.step_ups: list[tuple[int, str, tuple[str, ...]]] = []

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response, None]:
        """One request, and at most one step-up retry."""
        request.headers["Authorization"] = f"Bearer {self.token}"
        response = yield request
        if response.status_code != 403:
            return
        header = response.headers.get("www-authenticate")
        denial = read_challenge(response.status_code, header).denial
        if denial is None or denial.error != CHALLENGE_INSUFFICIENT_SCOPE:
            return
        self.narrator.got(f"HTTP 403 WWW-Authenticate: {header}")
        token = self.issuer.for_scopes(denial.scopes)
        if token is None or token == self.token:
            return
        self.step_ups.append((response.status_code, denial.error, denial.scopes))
        self.narrator.note(f"authorization server (static demo tokens): {' '.join(denial.scopes)} → {token}")
        self.token = token
        request.headers["Authorization"] = f"Bearer {token}"
        self.narrator.call("alice", "resends the same tools/call with the new token")
        yield request


async def credential_remediation(demo: Demo, state: ScenarioState) -> str:
    """11. SEP-2643: (a) a 403 ``insufficient_scope`` step-up, (b) an RAR ``authorization_details`` remediation."""
    server = demo.extra[NEED_CREDENTIALS]
    ledger = demo.scratch / "payments-ledger.jsonl"
    state.watch_file(ledger)
    issuer = DemoIssuer()
    auth = StepUpAuth("alice-read-token", issuer, demo.narrator)
    async with mcp_client(server.base_url, None, auth=auth) as client:
        demo.narrator.call("alice (token: payments:read)", 'tools/call pay {"amount": "25.00"}')
        paid = await client.call_tool("pay", {"amount": "25.00"})
        demo.narrator.got(describe(paid))
        demo.expect(
            len(auth.step_ups) == 1 and "payments:write" in auth.step_ups[0][2],
            "403 insufficient_scope, scope stepped up",
        )
        demo.expect(not paid.is_error, "the retry succeeded")
        stepped_up = sorted({READ, WRITE})
        demo.expect(demo.executions_in(ledger, op="pay", scopes=stepped_up) == 1, "pay ran once, under the new token")

        async def remediate(hint: AuthorizationRemediationHint) -> None:
            details = [dict(detail) for detail in hint.authorization_details]
            demo.narrator.got(f"envelope available, authorization_remediation: {_brief(details)}")
            token = issuer.for_details(details)
            if token is None:
                raise ScenarioFailed("no credential carries the requested authorization_details")
            demo.narrator.note(f"authorization server (static demo tokens): authorization_details → {token}")
            auth.token = token
            demo.narrator.call("alice", "resends transfer with the new token and the authorizationContextId")

        caller = AuthorizingCaller(client, remediate=remediate, origin_assured=True)
        demo.narrator.call("alice (token: payments:read payments:write)", f"tools/call transfer {json.dumps(TRANSFER)}")
        moved = await caller.call_tool("transfer", dict(TRANSFER))
        demo.narrator.got(describe(moved))
    demo.expect(not moved.is_error and envelope_of(moved) is None, "the retry succeeded, no denial")
    demo.expect(demo.executions_in(ledger, op="transfer") == 1, "transfer ran once, under the RAR token")
    return "403 insufficient_scope → stepped-up token; RAR authorization_details → new token; each ran once"


def _brief(details: list[dict[str, Any]]) -> str:
    return ", ".join(f"{d.get('type')} {d.get('amount')} {d.get('currency')} to {d.get('creditor')}" for d in details)
