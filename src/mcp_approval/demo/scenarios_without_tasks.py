"""Demo scenarios of a client that does not declare tasks (``[approval] without_tasks = "request"``)."""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.session import ClientRequestContext

from mcp_approval.client import CreateTaskResult
from mcp_approval.demo.clients import disposition_of, envelope_of, text_of
from mcp_approval.demo.context import Demo, ScenarioFailed, ScenarioState, describe
from mcp_approval.protocol import DISPOSITION_APPROVED_EXECUTED, DISPOSITION_DENIED_NOT_EXECUTED

__all__ = ["url_without_tasks", "without_tasks_approved", "without_tasks_denied"]

_AMOUNT = 50_000
_OUTCOME_TIMEOUT_S = 15.0
_REFERENCE = re.compile(r"reference (\S+)\)")


async def without_tasks_approved(demo: Demo, state: ScenarioState) -> str:
    """9. No tasks: the call opens a request; calling again waits on it; once approved, the result, once."""
    return await _without_tasks(demo, state, 9, "approve")


async def without_tasks_denied(demo: Demo, state: ScenarioState) -> str:
    """13. No tasks: carol denies; calling again answers denied-not-executed; the tool never ran."""
    return await _without_tasks(demo, state, 13, "deny")


async def _without_tasks(demo: Demo, state: ScenarioState, number: int, decision: str) -> str:
    account = demo.account(number)
    state.watch(to=account)
    arguments = {"to": account, "amount": _AMOUNT}
    async with demo.client("alice") as alice, demo.reviewers("carol") as (carol,):
        first = await demo.call(alice, "alice (no tasks extension)", "wire_transfer", arguments)
        reference = _pending_reference(demo, first)
        again = await demo.call(alice, "alice, calling again before a decision", "wire_transfer", arguments)
        demo.expect(_pending_reference(demo, again) == reference, "the same request, no second one")
        demo.expect(demo.executions(to=account) == 0, "no ledger entry while pending")
        record = await carol.find("wire_transfer", to=account)
        await demo.decide(carol, record, decision)
        result = await _outcome(demo, alice, arguments)
        state.disposition = disposition_of(result)
        expected = DISPOSITION_APPROVED_EXECUTED if decision == "approve" else DISPOSITION_DENIED_NOT_EXECUTED
        demo.expect(state.disposition == expected, f"the identical call answers {expected}")
        spent = await demo.call(alice, "alice, once more", "wire_transfer", arguments)
        demo.expect(_pending_reference(demo, spent) != reference, "the approval is spent: a new request")
    runs = 1 if decision == "approve" else 0
    demo.expect(demo.executions(to=account) == runs, f"{runs} ledger entr{'y' if runs == 1 else 'ies'}")
    decided = "approved" if decision == "approve" else "denied"
    return f"carol {decided} request {reference[:8]}…; the retry answered {expected}"


def _pending_reference(demo: Demo, result: Any) -> str:
    """Check the pending answer (an error, ``undisclosed``, not run) and return the reference it names."""
    demo.expect(not isinstance(result, CreateTaskResult) and bool(result.is_error), "an error result, no task")
    demo.expect(envelope_of(result) == "undisclosed", "envelope undisclosed, the remedy in the text")
    found = _REFERENCE.search(text_of(result))
    demo.expect(found is not None and "did not run" in text_of(result), "the text names the open request")
    assert found is not None
    return found.group(1)


async def _outcome(demo: Demo, alice: Client, arguments: dict[str, Any]) -> Any:
    """Call again until the answer carries a disposition (each earlier answer is the pending one)."""
    demo.narrator.call("alice, calling again after the decision", f"tools/call wire_transfer {json.dumps(arguments)}")
    deadline = time.monotonic() + _OUTCOME_TIMEOUT_S
    while time.monotonic() < deadline:
        result = await alice.session.call_tool("wire_transfer", arguments, allow_claimed=True)
        if isinstance(result, types.CallToolResult) and disposition_of(result) is not None:
            demo.narrator.got(describe(result))
            return result
        await asyncio.sleep(0.2)
    raise ScenarioFailed("no outcome for the identical call within the time allowed")


#: The ``inputRequests`` key of the requester page's link (``approval.url_without_tasks.PAGE_INPUT_KEY``).
_PAGE_KEY = "approval_page"


async def url_without_tasks(demo: Demo, state: ScenarioState) -> str:
    """15. No tasks, URL elicitation: a link to the requester's page; the retry with its state, the result once."""
    account = demo.account(15)
    state.watch(to=account)
    arguments = {"to": account, "amount": _AMOUNT}

    async def never(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        raise ScenarioFailed("this scenario answers the url elicitation itself")  # declares elicitation.url

    async with (
        demo.client("alice", elicitation_callback=never) as alice,
        demo.reviewers("carol") as (carol,),
        httpx2.AsyncClient(timeout=10) as browser,
    ):

        async def round_(answering: types.InputRequiredResult | None) -> Any:
            responses: dict[str, types.InputResponse] | None = None
            if answering is not None:
                responses = {_PAGE_KEY: types.ElicitResult(action="accept")}
            request_state = answering.request_state if answering is not None else None
            return await alice.session.call_tool(
                "wire_transfer",
                arguments,
                input_responses=responses,
                request_state=request_state,
                allow_input_required=True,
            )

        demo.narrator.call("alice (elicitation.url, no tasks)", f"tools/call wire_transfer {json.dumps(arguments)}")
        first = await round_(None)
        demo.expect(isinstance(first, types.InputRequiredResult), "input_required, no task and no error")
        assert isinstance(first, types.InputRequiredResult)
        link = _page_link(first)
        demo.narrator.got(f"url-mode elicitation: {link[:72]}…")
        demo.expect(envelope_of(first) == "available", "envelope available with a url hint")
        page = await browser.get(link)
        demo.expect(page.status_code == 200 and "Waiting for a decision" in page.text, "the page: waiting")
        still = await round_(first)
        still_pending = isinstance(still, types.CallToolResult) and still.is_error and disposition_of(still) is None
        demo.expect(still_pending, "retry after the page: the pending answer, no second round")
        demo.expect(demo.executions(to=account) == 0, "no ledger entry while pending")
        record = await carol.find("wire_transfer", to=account)
        await demo.decide(carol, record, "approve")
        result = await _url_outcome(demo, round_, first)
        state.disposition = disposition_of(result)
        demo.expect(state.disposition == DISPOSITION_APPROVED_EXECUTED, "the retry answers approved-executed")
        page = await browser.get(link)
        demo.expect("approved-executed" in page.text and "carol" not in page.text, "the page: outcome, no approver")
    demo.expect(demo.executions(to=account) == 1, "1 ledger entry")
    return "alice was sent to her request's page; carol approved; the retry with its state answered the result once"


def _page_link(result: types.InputRequiredResult) -> str:
    """The url of the page elicitation a round carries (checked: one url-mode elicitation)."""
    request = (result.input_requests or {}).get(_PAGE_KEY)
    params = request.params if isinstance(request, types.ElicitRequest) else None
    if not isinstance(params, types.ElicitRequestURLParams):
        raise ScenarioFailed(f"expected a url-mode elicitation under {_PAGE_KEY!r}, got {request!r}")
    return params.url


async def _url_outcome(demo: Demo, round_: Any, first: types.InputRequiredResult) -> Any:
    """Retry with the round's state until it answers the outcome (earlier answers are the pending one)."""
    demo.narrator.call("alice, retrying with requestState", "tools/call wire_transfer + inputResponses + requestState")
    deadline = time.monotonic() + _OUTCOME_TIMEOUT_S
    while time.monotonic() < deadline:
        result = await round_(first)
        if isinstance(result, types.CallToolResult) and disposition_of(result) is not None:
            demo.narrator.got(describe(result))
            return result
        await asyncio.sleep(0.2)
    raise ScenarioFailed("no outcome for the retry within the time allowed")
