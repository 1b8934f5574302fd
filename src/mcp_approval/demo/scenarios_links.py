"""Scenario 10 (the approval as a url-mode interaction) and 12 (the approval flow through the ARAP backend)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from urllib.parse import unquote, urlsplit

import mcp_types as types
from mcp.client.session import ClientRequestContext

from mcp_approval.demo.clients import Reviewer, disposition_of, envelope_of, until
from mcp_approval.demo.context import Demo, ScenarioFailed, ScenarioState, is_task
from mcp_approval.demo.scenarios import LARGE, TASK_WAIT_S, tasks_client
from mcp_approval.demo.services import ARAP_TREASURY, NEED_ARAP
from mcp_approval.protocol import DISPOSITION_APPROVED_EXECUTED

__all__ = ["arap_approval", "url_mode_approval"]

#: The task status of an approval task that carries the reviewers' link.
LINKED_STATUS = "input_required"


async def url_mode_approval(demo: Demo, state: ScenarioState) -> str:
    """10. The approval task starts ``input_required`` with one url-mode elicitation naming the reviewers' page.

    The client's elicitation callback shows the link and acknowledges it, which only moves the task
    back to ``working``; carol then decides the page's request, and the task ends ``approved-executed``.
    """
    account = demo.account(10)
    state.watch(to=account)
    shown: list[str] = []
    link_shown = asyncio.Event()
    tasks = tasks_client()

    async def user(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        """Alice's client: shows the page's link and acknowledges it; the reviewer decides there, later."""
        if not isinstance(params, types.ElicitRequestURLParams):
            raise ScenarioFailed(f"expected a url-mode elicitation, got {type(params).__name__}")
        shown.append(params.url)
        link_shown.set()
        demo.narrator.got(f"url-mode elicitation: {params.url}")
        demo.narrator.call("alice", "acknowledges the link (tasks/update accept); that approves nothing")
        return types.ElicitResult(action="accept")

    async with (
        demo.reviewers("carol") as (carol,),
        demo.client("alice", extensions=[tasks], elicitation_callback=user) as alice,
    ):
        created = await demo.call(alice, "alice (declares elicitation.url)", "wire_transfer", _args(account))
        demo.expect(getattr(created, "status", None) == LINKED_STATUS, "a task waiting on the approval link")

        async def status() -> str:
            return (await tasks.get(alice.session, created.task_id)).status

        async def reviewer_side() -> None:
            await asyncio.wait_for(link_shown.wait(), TASK_WAIT_S)
            await _decide_on_page(demo, carol, shown[0], account, status)

        async with asyncio.TaskGroup() as group:
            waiting = group.create_task(demo.wait(tasks, alice, "alice", created.task_id))
            group.create_task(reviewer_side())
        result = waiting.result()
    demo.expect(len(shown) == 1, "exactly one link was shown")
    state.disposition = disposition_of(result)
    demo.expect(state.disposition == DISPOSITION_APPROVED_EXECUTED, "disposition approved-executed")
    demo.expect(demo.executions(to=account) == 1, "exactly one ledger entry")
    return "approval shown as a url-mode elicitation; carol decided on the page; ran once"


def _args(account: str) -> dict[str, object]:
    return {"to": account, "amount": LARGE}


async def _decide_on_page(
    demo: Demo, carol: Reviewer, url: str, account: str, status_of: Callable[[], Awaitable[str]]
) -> None:
    """Once the acknowledged task is ``working`` again, carol approves the page's request (reviewer API)."""
    approval_id = unquote(urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1])
    await until(status_of, lambda status: status == "working", timeout_s=10, what="the acknowledged task")
    record = await carol.find("wire_transfer", to=account)
    demo.expect(record["id"] == approval_id, "the link names this call's approval request")
    demo.expect(record["status"] == "pending", "acknowledged, the task is working; the request is still pending")
    demo.expect(demo.executions(to=account) == 0, "nothing ran before the decision")
    await demo.decide(carol, record, "approve")


async def arap_approval(demo: Demo, state: ScenarioState) -> str:
    """12. Scenario 2 with the policy and the approval request at a remote AuthZEN PDP + ARAP ARS."""
    account = demo.account(12)
    state.watch(to=account)
    server, ars = demo.extra[ARAP_TREASURY], demo.extra[NEED_ARAP]
    tasks = tasks_client()
    async with (
        demo.client("alice", extensions=[tasks], base_url=server.base_url) as alice,
        demo.reviewers("carol", base_url=ars.base_url) as (carol,),
    ):
        created = await demo.call(alice, "alice (ARAP-backed server)", "wire_transfer", _args(account))
        demo.expect(is_task(created), "a working task: the PDP's requestable denial became an Access Request")
        demo.expect(envelope_of(created) == "available", "envelope available with a task hint")
        record = await carol.find("wire_transfer", to=account)
        demo.narrator.info(f"   the Access Request Service at {ars.base_url} holds request {record['id'][:8]}…")
        demo.expect(demo.executions(to=account) == 0, "nothing ran while pending")
        await demo.decide(carol, record, "approve")
        result = await demo.wait(tasks, alice, "alice", created.task_id)
    state.disposition = disposition_of(result)
    demo.expect(state.disposition == DISPOSITION_APPROVED_EXECUTED, "disposition approved-executed")
    demo.expect(demo.executions(to=account) == 1, "exactly one ledger entry")
    return "PDP + ARS at arap-server; carol approved there; ran once"
