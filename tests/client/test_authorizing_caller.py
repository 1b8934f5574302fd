"""The authorizing caller against a real gated server over in-process streamable HTTP."""

from __future__ import annotations

import itertools
import logging
from collections import Counter
from typing import Any

import httpx2
import pytest

from mcp_approval.client.authorization import AuthorizationDenied, AuthorizingCaller
from mcp_approval.denials import Remediation
from mcp_approval.denials.models import AuthorizationRemediationHint
from mcp_approval.protocol import META_AUTHORIZATION_CONTEXT_ID
from tests.client.support import DETAILS, connected

pytestmark = pytest.mark.anyio


def swapping_token(http: httpx2.AsyncClient, token: str, seen: list[AuthorizationRemediationHint]) -> Any:
    """A remediator that 'obtains' ``token`` for the requested details by swapping the bearer token."""

    async def remediate(hint: AuthorizationRemediationHint) -> None:
        seen.append(hint)
        http.headers["Authorization"] = f"Bearer {token}"

    return remediate


def remediating(client: Any, http: httpx2.AsyncClient, seen: list[AuthorizationRemediationHint], **options: Any) -> Any:
    """A caller whose remediator swaps in the payments token; origin assured."""
    remediate = swapping_token(http, "alice-payments-token", seen)
    return AuthorizingCaller(client, remediate=remediate, origin_assured=True, **options)


def text(result: Any) -> str:
    return " ".join(item.text for item in result.content if item.type == "text")


async def test_a_credential_remediation_swaps_the_token_and_retries_once_echoing_the_context_id():
    ran: Counter[str] = Counter()
    seen: list[AuthorizationRemediationHint] = []
    async with connected(ran) as (client, http, recorder):
        remediate = swapping_token(http, "alice-payments-token", seen)
        caller = AuthorizingCaller(client, remediate=remediate, origin_assured=True)
        result = await caller.call_tool("pay", {"amount": "5.00"})
    assert text(result) == "paid 5.00"
    assert [hint.authorization_details for hint in seen] == [DETAILS]
    first, retry = recorder.of("pay")
    assert first.authorization == "Bearer alice-token"
    assert META_AUTHORIZATION_CONTEXT_ID not in first.meta
    assert retry.authorization == "Bearer alice-payments-token"
    echoed = retry.meta[META_AUTHORIZATION_CONTEXT_ID]
    assert isinstance(echoed, str)
    assert echoed
    assert ran == Counter({"pay": 1})


async def test_the_echo_is_the_context_id_of_the_denial_verbatim(caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.INFO, logger="mcp_approval.denials")
    ran: Counter[str] = Counter()
    async with connected(ran) as (client, http, recorder):
        caller = remediating(client, http, [])
        await caller.call_tool("pay", {"amount": "5.00"})
    echoed = recorder.of("pay")[1].meta[META_AUTHORIZATION_CONTEXT_ID]
    assert f"echoes authorization context {echoed}" in caplog.text  # the gate saw the handle it issued


async def test_caller_meta_is_kept_on_every_attempt():
    ran: Counter[str] = Counter()
    async with connected(ran) as (client, http, recorder):
        caller = remediating(client, http, [])
        await caller.call_tool("pay", {"amount": "5.00"}, meta={"example.com/trace": "t-1"})
    assert [call.meta.get("example.com/trace") for call in recorder.of("pay")] == ["t-1", "t-1"]


@pytest.mark.parametrize(
    ("tool", "arguments", "remediation"),
    [("drop_table", {"table": "users"}, Remediation.UNAVAILABLE), ("deploy", {"env": "prod"}, Remediation.UNDISCLOSED)],
)
async def test_a_final_denial_raises_and_is_never_retried(
    tool: str, arguments: dict[str, Any], remediation: Remediation
):
    ran: Counter[str] = Counter()
    seen: list[AuthorizationRemediationHint] = []
    async with connected(ran) as (client, http, recorder):
        caller = remediating(client, http, seen)
        with pytest.raises(AuthorizationDenied) as denied:
            await caller.call_tool(tool, arguments)
    assert denied.value.denial.remediation is remediation
    assert denied.value.result.is_error
    assert denied.value.attempts == 1
    assert "must not be retried unchanged" in denied.value.why
    assert len(recorder.of(tool)) == 1
    assert seen == []  # no reauthorization began
    assert ran == Counter()


@pytest.mark.parametrize("max_retries", [0, 1, 2])
async def test_the_retry_limit_is_respected(max_retries: int):
    ran: Counter[str] = Counter()
    seen: list[AuthorizationRemediationHint] = []
    async with connected(ran) as (client, http, recorder):
        remediate = swapping_token(http, "alice-payments-token", seen)  # the PDP is never satisfied
        caller = AuthorizingCaller(client, remediate=remediate, origin_assured=True, max_retries=max_retries)
        with pytest.raises(AuthorizationDenied) as denied:
            await caller.call_tool("always_remediable", {})
    sent = recorder.of("always_remediable")
    assert len(sent) == max_retries + 1
    assert len(seen) == max_retries
    assert denied.value.attempts == max_retries + 1
    assert denied.value.denial.remediation is Remediation.AVAILABLE
    for earlier, retry in itertools.pairwise(sent):
        assert retry.meta[META_AUTHORIZATION_CONTEXT_ID] != earlier.meta.get(META_AUTHORIZATION_CONTEXT_ID)
    assert ran == Counter()


async def test_without_a_remediator_or_origin_assurance_a_remediable_denial_is_raised_unretried():
    ran: Counter[str] = Counter()
    seen: list[AuthorizationRemediationHint] = []
    async with connected(ran) as (client, http, recorder):
        with pytest.raises(AuthorizationDenied) as no_callback:
            await AuthorizingCaller(client, origin_assured=True).call_tool("pay", {"amount": "5.00"})
        unassured = AuthorizingCaller(client, remediate=swapping_token(http, "alice-payments-token", seen))
        with pytest.raises(AuthorizationDenied) as no_assurance:
            await unassured.call_tool("pay", {"amount": "5.00"})
    assert no_callback.value.why == "no credential remediator is configured"
    assert no_assurance.value.why == "the origin is not assured"
    assert no_callback.value.denial.authorization_remediation is not None
    assert seen == []
    assert len(recorder.of("pay")) == 2
    assert ran == Counter()


async def test_a_remediator_that_gives_up_propagates_and_nothing_is_retried():
    async def refuse(hint: AuthorizationRemediationHint) -> None:
        raise PermissionError("the user declined")

    ran: Counter[str] = Counter()
    async with connected(ran) as (client, _, recorder):
        with pytest.raises(PermissionError):
            await AuthorizingCaller(client, remediate=refuse, origin_assured=True).call_tool("pay", {"amount": "1"})
    assert len(recorder.of("pay")) == 1
    assert ran == Counter()


async def test_unknown_hint_types_are_ignored():
    ran: Counter[str] = Counter()
    seen: list[AuthorizationRemediationHint] = []
    async with connected(ran) as (client, http, recorder):
        caller = remediating(client, http, seen)
        with pytest.raises(AuthorizationDenied) as denied:
            await caller.call_tool("unknown_hints", {})
    assert denied.value.denial.hints == ()
    assert denied.value.why == "no remediation this client can act on"
    assert seen == []
    assert len(recorder.of("unknown_hints")) == 1


async def test_an_ill_formed_envelope_is_logged_and_the_result_returned(caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.WARNING, logger="mcp_approval.client")
    ran: Counter[str] = Counter()
    async with connected(ran) as (client, http, recorder):
        caller = remediating(client, http, [])
        result = await caller.call_tool("garbled", {})
    assert result.is_error
    assert text(result) == "odd"
    assert "ill-formed authorization denial envelope" in caplog.text
    assert len(recorder.of("garbled")) == 1
    assert ran == Counter({"garbled": 1})


async def test_an_allowed_call_is_returned_as_it_is():
    ran: Counter[str] = Counter()
    async with connected(ran, token="alice-payments-token") as (client, _, recorder):
        result = await AuthorizingCaller(client).call_tool("pay", {"amount": "2.00"})
    assert text(result) == "paid 2.00"
    assert len(recorder.of("pay")) == 1


def test_a_negative_retry_limit_is_refused():
    with pytest.raises(ValueError, match="max_retries"):
        AuthorizingCaller(object(), max_retries=-1)  # type: ignore[arg-type]
