"""URL elicitation without tasks: a client that declared ``elicitation.url`` but not tasks.

With ``without_tasks = "request"`` and ``requester_url``, the requester is sent to a page for its
own request: on 2026-07-28 by an ``input_required`` round (url-mode elicitation + sealed
``requestState``) whose retry takes the outcome once; on 2025-11-25 by the ``-32042`` error.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
import pytest
from mcp.shared.exceptions import MCPError

from mcp_approval.approval.binding import CallBinding
from mcp_approval.approval.options import ApprovalOptions
from mcp_approval.approval.without_tasks.links import INVALID_STATE_MESSAGE, PAGE_INPUT_KEY, RequesterLinks
from mcp_approval.checks.wire import LegacySession, Reply, Wire, envelope
from mcp_approval.clock import iso8601
from mcp_approval.config import ConfigError, load_config
from mcp_approval.keyring import BindingCipher
from mcp_approval.protocol import URL_ELICITATION_REQUIRED
from tests.approval.inprocess import Harness, inprocess_treasury
from tests.approval.test_without_tasks import ended, transfers
from tests.support.treasury import deployment_dir
from tests.treasury.helpers import AUTHORIZATION, DISPOSITION, approval_for, text_of

pytestmark = pytest.mark.anyio

PAGE = "http://127.0.0.1:8000/requests/{request_token}"
URL_MODE = {"approval": {"without_tasks": "request", "requester_url": PAGE}}
URL_NO_TASKS = envelope(tasks=False, elicitation=True)
ACCEPTED = {PAGE_INPUT_KEY: {"action": "accept"}}


async def call(wire: Wire, to: str, *, state: str | None = None, amount: int = 30_000) -> Reply:
    params: dict[str, Any] = {"name": "wire_transfer", "arguments": {"to": to, "amount": amount}}
    if state is not None:
        params |= {"requestState": state, "inputResponses": ACCEPTED}
    return await wire.request("tools/call", params, meta=URL_NO_TASKS)


def page_url(round_: dict[str, Any]) -> str:
    return str(round_["inputRequests"][PAGE_INPUT_KEY]["params"]["url"])


def reference_in(round_: dict[str, Any]) -> str:
    """The request reference the page elicitation's message names."""
    found = re.search(r"request (\S+) is open", round_["inputRequests"][PAGE_INPUT_KEY]["params"]["message"])
    assert found is not None, round_
    return found.group(1)


def assert_url_round(round_: dict[str, Any]) -> None:
    """The 2026-07-28 URL interaction: input_required, one url elicitation, a state, envelope ``available`` + url."""
    assert round_["resultType"] == "input_required"
    (request,) = round_["inputRequests"].values()
    assert request["method"] == "elicitation/create"
    assert request["params"]["mode"] == "url"
    assert urlsplit(request["params"]["url"]).path.startswith("/requests/")
    assert "elicitationId" not in request["params"]
    assert round_["requestState"]
    authorization = round_["_meta"][AUTHORIZATION]
    assert authorization["remediation"] == "available"
    assert authorization["remediationHints"] == [{"type": "url"}]
    assert authorization["authorizationContextId"]


def assert_pending_after_the_page(answer: dict[str, Any], reference: str) -> None:
    """The retry after a URL round while the request is open: the pending answer, no further round."""
    assert "resultType" not in answer or answer["resultType"] == "complete"
    assert "inputRequests" not in answer
    assert answer["isError"] is True
    assert answer["_meta"][AUTHORIZATION]["remediation"] == "undisclosed"
    assert DISPOSITION not in answer["_meta"]
    assert f"(reference {reference})" in text_of(answer)
    assert "did not run" in text_of(answer)


async def page(harness: Harness, url: str) -> httpx.Response:
    return await harness.http.get(urlsplit(url).path)


@pytest.mark.sep_check(
    "sep-2643-server-url-hint",
    "sep-2643-server-url-needs-declared-elicitation",
    "sep-2643-server-url-input-required",
    "sep-2643-server-url-state-travels",
    "sep-2643-server-url-retry-resumes",
    "sep-2643-server-pending-decision-not-executed",
)
async def test_a_url_client_is_sent_to_its_page_and_the_retry_runs_the_call_once(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, URL_MODE) as harness:
        first = (await call(harness.alice, "acct-url")).result
        assert_url_round(first)
        reference = reference_in(first)
        carol = harness.reviewer("carol")
        assert len(await carol.pending()) == 1
        still = (await call(harness.alice, "acct-url", state=first["requestState"])).result
        assert_pending_after_the_page(still, reference)  # the page was given: never the same elicitation again
        again = (await call(harness.alice, "acct-url")).result  # a fresh identical call joins the request
        assert reference_in(again) == reference
        assert len(await carol.pending()) == 1
        assert transfers(harness, "acct-url") == []
        approval = await approval_for(carol, "wire_transfer", to="acct-url")
        assert (await carol.decide(approval["id"], "approve")).status_code == 200
        await ended(harness, reference)
        result = (await call(harness.alice, "acct-url", state=first["requestState"])).result
        assert result["isError"] is False
        assert result["_meta"][DISPOSITION] == "approved-executed"
        assert AUTHORIZATION not in result["_meta"]
        assert len(transfers(harness, "acct-url")) == 1
        # The approval is spent: the same state again asks anew (a new request), and runs nothing.
        spent = (await call(harness.alice, "acct-url", state=first["requestState"])).result
        assert_url_round(spent)
        assert reference_in(spent) != reference
        assert len(transfers(harness, "acct-url")) == 1


async def test_a_declined_page_is_followed_by_the_pending_answer_not_the_page_again(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, URL_MODE) as harness:
        first = (await call(harness.alice, "acct-url-declined")).result
        assert_url_round(first)
        declined = {"requestState": first["requestState"], "inputResponses": {PAGE_INPUT_KEY: {"action": "decline"}}}
        arguments = {"to": "acct-url-declined", "amount": 30_000}
        params = {"name": "wire_transfer", "arguments": arguments} | declined
        answer = (await harness.alice.request("tools/call", params, meta=URL_NO_TASKS)).result
        assert_pending_after_the_page(answer, reference_in(first))
        assert len(await harness.reviewer("carol").pending()) == 1  # declining the page withdraws nothing
        assert transfers(harness, "acct-url-declined") == []


@pytest.mark.sep_check("sep-2643-server-url-state-travels", "sep-2643-server-url-retry-resumes")
async def test_the_retry_after_denial_answers_denied_not_executed(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, URL_MODE) as harness:
        first = (await call(harness.alice, "acct-url-denied")).result
        carol = harness.reviewer("carol")
        approval = await approval_for(carol, "wire_transfer", to="acct-url-denied")
        assert (await carol.decide(approval["id"], "deny", "not this one")).status_code == 200
        await ended(harness, reference_in(first))
        result = (await call(harness.alice, "acct-url-denied", state=first["requestState"])).result
        assert result["isError"] is True
        assert result["_meta"][DISPOSITION] == "denied-not-executed"
        assert "not this one" not in json.dumps(result)
        assert transfers(harness, "acct-url-denied") == []


async def test_concurrent_retries_with_one_state_take_the_outcome_once(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, URL_MODE) as harness:
        first = (await call(harness.alice, "acct-url-race")).result
        carol = harness.reviewer("carol")
        approval = await approval_for(carol, "wire_transfer", to="acct-url-race")
        assert (await carol.decide(approval["id"], "approve")).status_code == 200
        await ended(harness, reference_in(first))

        results: list[dict[str, Any]] = []

        async def retry() -> None:
            results.append((await call(harness.alice, "acct-url-race", state=first["requestState"])).result)

        async with anyio.create_task_group() as group:
            for _ in range(20):
                group.start_soon(retry)
        executed = [r for r in results if r.get("_meta", {}).get(DISPOSITION) == "approved-executed"]
        assert len(executed) == 1
        assert all(r["resultType"] == "input_required" for r in results if r not in executed)
        assert len(transfers(harness, "acct-url-race")) == 1


@pytest.mark.sep_check("sep-2848-mrtr-retry-matches-binding")
async def test_a_tampered_request_state_is_refused_with_invalid_params(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, URL_MODE) as harness:
        first = (await call(harness.alice, "acct-url-tamper")).result
        state = first["requestState"]
        tampered = state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB")
        error = (await call(harness.alice, "acct-url-tamper", state=tampered)).error
        assert error["code"] == -32602
        assert error["message"] == INVALID_STATE_MESSAGE
        other_call = (await call(harness.alice, "acct-url-other", state=state)).error  # another call's state
        assert other_call["code"] == -32602
        assert transfers(harness, "acct-url-tamper") == []


@pytest.mark.sep_check("sep-2643-server-context-id-not-authorization", "sep-2848-mrtr-retry-matches-binding")
async def test_another_principals_state_reads_like_an_unknown_one(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, URL_MODE) as harness:
        bob = harness.alice.as_principal("bob-token")
        first = (await call(harness.alice, "acct-url-foreign")).result
        carol = harness.reviewer("carol")
        approval = await approval_for(carol, "wire_transfer", to="acct-url-foreign")
        assert (await carol.decide(approval["id"], "approve")).status_code == 200
        await ended(harness, reference_in(first))
        foreign = (await call(bob, "acct-url-foreign", state=first["requestState"])).error
        unknown = (await call(bob, "acct-url-foreign", state="v1.not-a-state")).error
        assert (
            (foreign["code"], foreign["message"])
            == (unknown["code"], unknown["message"])
            == (-32602, INVALID_STATE_MESSAGE)
        )
        assert len(transfers(harness, "acct-url-foreign")) == 1  # the one approved run, nothing for bob
        mine = (await call(harness.alice, "acct-url-foreign", state=first["requestState"])).result
        assert mine["_meta"][DISPOSITION] == "approved-executed"


@pytest.mark.sep_check("sep-2848-mrtr-retry-matches-binding")
def test_the_state_layer_refuses_another_owner_or_call_alike() -> None:
    """Beneath the SDK's seal (which binds tokens' principals), the state names its call and owner."""
    links = RequesterLinks(BindingCipher.ephemeral(), ApprovalOptions(requester_url=PAGE))
    binding = CallBinding(tool="wire_transfer", arguments={"to": "a", "amount": 1}, principal="alice")
    state = links.seal_state("ref-1", binding, "owner-a")
    assert links.open_state(state, binding, "owner-a") == "ref-1"
    other = CallBinding(tool="wire_transfer", arguments={"to": "b", "amount": 1}, principal="alice")
    middle = len(state) // 2
    flipped = state[:middle] + ("A" if state[middle] != "A" else "B") + state[middle + 1 :]
    for attempt in ((state, binding, "owner-b"), (state, other, "owner-a"), (flipped, binding, "owner-a")):
        with pytest.raises(MCPError) as refused:
            links.open_state(*attempt)
        assert (refused.value.error.code, refused.value.error.message) == (-32602, INVALID_STATE_MESSAGE)


async def test_the_requester_page_shows_status_and_outcome_never_approvers(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, URL_MODE) as harness:
        first = (await call(harness.alice, "acct-url-page")).result
        reference = reference_in(first)
        pending = await page(harness, page_url(first))
        assert pending.status_code == 200
        assert pending.headers["cache-control"] == "no-store"
        assert pending.headers["referrer-policy"] == "no-referrer"
        assert reference in pending.text
        assert "Waiting for a decision" in pending.text
        carol = harness.reviewer("carol")
        approval = await approval_for(carol, "wire_transfer", to="acct-url-page")
        assert (await carol.decide(approval["id"], "deny", "carol says no")).status_code == 200
        await ended(harness, reference)
        decided = await page(harness, page_url(first))
        assert "denied-not-executed" in decided.text
        for secret in ("carol", "carol says no", "acct-url-page", "30000"):
            assert secret not in decided.text.lower()
        url = page_url(first)
        forged = await page(harness, url[:-6] + "AAAAAA")
        assert forged.status_code == 404
        assert reference not in forged.text
        assert (await page(harness, "http://127.0.0.1:8000/requests/")).status_code == 404


async def test_legacy_revision_answers_url_elicitation_required(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, URL_MODE) as harness:
        legacy = await LegacySession.open(harness.http, "alice-token")
        first = await legacy.call("wire_transfer", {"to": "acct-legacy", "amount": 30_000})
        error = first["error"]
        assert error["code"] == URL_ELICITATION_REQUIRED == -32042
        (elicitation,) = error["data"]["elicitations"]
        reference = elicitation["elicitationId"].removeprefix("approval-")
        workflow = await harness.deployment.approval.store.get(reference)
        assert workflow is not None
        assert workflow.request_deadline is not None
        # The message itself names the request and its deadline: a client may show only the message.
        assert f"approval request {reference} is open until {iso8601(workflow.request_deadline)}" in error["message"]
        assert "did not run" in error["message"]
        assert elicitation["mode"] == "url"
        assert elicitation["elicitationId"]
        assert "needs approval" in elicitation["message"]
        status = await page(harness, elicitation["url"])
        assert status.status_code == 200
        assert "Waiting for a decision" in status.text
        again = await legacy.call("wire_transfer", {"to": "acct-legacy", "amount": 30_000})
        assert again["error"]["data"]["elicitations"][0]["elicitationId"] == elicitation["elicitationId"]
        carol = harness.reviewer("carol")
        assert len(await carol.pending()) == 1
        approval = await approval_for(carol, "wire_transfer", to="acct-legacy")
        assert (await carol.decide(approval["id"], "approve")).status_code == 200
        await ended(harness, elicitation["elicitationId"].removeprefix("approval-"))
        result = (await legacy.call("wire_transfer", {"to": "acct-legacy", "amount": 30_000}))["result"]
        assert result["_meta"][DISPOSITION] == "approved-executed"
        assert len(transfers(harness, "acct-legacy")) == 1
        spent = await legacy.call("wire_transfer", {"to": "acct-legacy", "amount": 30_000})
        assert spent["error"]["code"] == -32042
        assert len(transfers(harness, "acct-legacy")) == 1


async def test_without_requester_url_a_url_client_gets_the_undisclosed_answer(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, {"approval": {"without_tasks": "request"}}) as harness:
        first = (await call(harness.alice, "acct-no-page")).result
        assert first["isError"] is True
        assert first["_meta"][AUTHORIZATION]["remediation"] == "undisclosed"
        assert "did not run" in text_of(first)


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        ("http://mcp.example.test/requests/{request_token}", "http is allowed only on a loopback host"),
        ("https://mcp.example.test/requests/", "must contain {request_token}"),
        ("https://{request_token}.example.test/", "may not be part of the host"),
        ("https://user:pw@mcp.example.test/r/{request_token}", "must not carry a user name or password"),
    ],
)
def test_a_bad_requester_url_in_the_file_names_file_and_field(tmp_path: Path, url: str, complaint: str) -> None:
    directory = deployment_dir(tmp_path, {"approval": {"without_tasks": "request", "requester_url": url}})
    with pytest.raises(ConfigError) as refused:
        load_config(directory / "config.toml")
    message = str(refused.value)
    assert "config.toml" in message
    assert "requester_url" in message
    assert complaint in message


@pytest.mark.parametrize(
    "url", ["https://mcp.example.test/requests/{request_token}", "http://localhost:8000/r/{request_token}"]
)
def test_a_good_requester_url_fills_in_the_token_percent_encoded(url: str) -> None:
    options = ApprovalOptions(requester_url=url)
    assert options.requester_link("dev-1:a/b") == url.replace("{request_token}", "dev-1%3Aa%2Fb")
    assert ApprovalOptions().requester_link("x") is None


@pytest.mark.sep_check("sep-2643-server-url-needs-declared-elicitation")
async def test_only_a_declared_url_elicitation_is_sent_to_the_page(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, URL_MODE) as harness:
        legacy = await LegacySession.open(harness.http, "alice-token", capabilities={"elicitation": {}})  # form only
        plain = (await legacy.call("wire_transfer", {"to": "acct-form-only", "amount": 30_000}))["result"]
        assert plain["isError"] is True
        assert plain["_meta"][AUTHORIZATION]["remediation"] == "undisclosed"
        modern = envelope(tasks=False, elicitation=False)
        arguments = {"to": "acct-no-elicitation", "amount": 30_000}
        undeclared = (await harness.alice.call_tool("wire_transfer", arguments, meta=modern)).result
        assert undeclared["_meta"][AUTHORIZATION]["remediation"] == "undisclosed"
        assert "inputRequests" not in undeclared
        with_tasks = (await harness.alice.call_tool("wire_transfer", {"to": "acct-task", "amount": 30_000})).result
        assert with_tasks["resultType"] == "task"  # a tasks client still gets its task
