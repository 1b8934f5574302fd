"""Scenarios for the two other remedies SEP-2643 describes: a URL the user visits (a client without
tasks that declares URL elicitation), and a new credential (a token that lacks the scope)."""

from __future__ import annotations

import json
import re
from typing import Any

from mcp_approval.checks.judge import envelope, member
from mcp_approval.checks.report import Failed, Skipped
from mcp_approval.checks.run import CheckRun
from mcp_approval.checks.wire import Reply, Wire
from mcp_approval.checks.wire import envelope as request_envelope
from mcp_approval.protocol import (
    DENIALS_EXTENSION,
    HINT_AUTHORIZATION_REMEDIATION,
    HINT_URL,
    REMEDIATION_AVAILABLE,
    RESULT_TYPE_INPUT_REQUIRED,
    RESULT_TYPE_TASK,
)

__all__ = ["credential_challenge", "url_remediation"]

#: The two challenges that carry a token remedy in ``WWW-Authenticate`` (SEP-2643's table), and the
#: parameter each must carry it in.
_CHALLENGES = {"insufficient_scope": "scope", "insufficient_authorization": "authorization_remediation"}


def _hints(found: Any) -> list[dict[str, Any]]:
    hints = found.get("remediationHints") if isinstance(found, dict) else None
    return [hint for hint in hints if isinstance(hint, dict)] if isinstance(hints, list) else []


async def url_remediation(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """A client without tasks that declares URL elicitation may be sent to a URL: the envelope then has a
    ``url`` hint, the state travels in ``requestState``, and the retry resumes the call."""
    nonce = run.nonce()
    opened = run.register(run.one, run.arguments(nonce), nonce)
    meta = request_envelope(tasks=False, elicitation=True)
    reply = await run.one.request("tools/call", {"name": run.options.tool, "arguments": opened.arguments}, meta=meta)
    evidence.append(f"tools/call without tasks, declaring URL elicitation: {reply.brief()}")
    await run.check_not_run(opened, "a call without tasks that declared URL elicitation")
    result = reply.result if reply.has_result else {}
    asked = member(result, "inputRequests")
    urls = {key: request for key, request in asked.items() if member(member(asked, key), "params").get("mode") == "url"}
    if result.get("resultType") != RESULT_TYPE_INPUT_REQUIRED or not urls:
        raise Skipped("the server offers no URL-mode remedy to a client without tasks")
    found = envelope(result)
    evidence.append(f"envelope: {json.dumps(found)}")
    if DENIALS_EXTENSION in run.extensions and (
        not isinstance(found, dict)
        or found.get("remediation") != REMEDIATION_AVAILABLE
        or HINT_URL not in [hint.get("type") for hint in _hints(found)]
    ):
        raise Failed("the URL-mode denial's envelope is not available with a url hint")
    state = result.get("requestState")
    if not isinstance(state, str) or not state:
        raise Failed("the URL round carries no requestState: the state it began does not travel with it")
    retry = {"inputResponses": {key: {"action": "accept"} for key in urls}, "requestState": state}
    again = await run.one.request(
        "tools/call", {"name": run.options.tool, "arguments": opened.arguments, **retry}, meta=meta
    )
    evidence.append(f"the retry with requestState and the accepted URL: {again.brief()}")
    await run.check_not_run(opened, "the retry of a URL round nobody approved")
    if again.is_error:
        raise Failed(f"the retry of the URL round was refused: {again.brief()}")
    return "a url hint, the state in requestState, and the retry resumed the call"


async def credential_challenge(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """A token that lacks the scope the call needs gets a denial that names its remedy: a challenge with
    ``insufficient_scope`` or ``insufficient_authorization``, or an envelope with an
    ``authorization_remediation`` hint. Never a bare 401/403, never a run."""
    token = run.options.underscoped_token
    if token is None:
        raise Skipped("--underscoped-token not given (no token that lacks the call's scope)")
    wire = run.one.as_principal(token)
    nonce = run.nonce()
    opened = run.register(wire, run.arguments(nonce), nonce)
    reply = await wire.call(run.options.tool, opened.arguments)
    evidence.append(f"tools/call with the token lacking the scope: {reply.brief()}")
    await run.check_not_run(opened, "a call whose token lacks the scope")
    if reply.status in (401, 403):
        return _challenge(reply, evidence)
    result = reply.result if reply.has_result else {}
    if result.get("resultType") == RESULT_TYPE_TASK:
        opened.task_id = str(result.get("taskId"))
        raise Failed("a call whose token lacks the scope became an approval task, not a credential remedy")
    if reply.is_error or result.get("isError") is not True:
        raise Failed(f"the call was neither a challenge nor a denial result: {reply.brief()}")
    found = envelope(result)
    evidence.append(f"envelope: {json.dumps(found)}")
    hints = [hint for hint in _hints(found) if hint.get("type") == HINT_AUTHORIZATION_REMEDIATION]
    if not isinstance(found, dict) or found.get("remediation") != REMEDIATION_AVAILABLE or not hints:
        raise Failed("the denial does not say a new credential would do (available, authorization_remediation)")
    if not isinstance(hints[0].get("authorization_details"), list):
        raise Failed("the authorization_remediation hint has no authorization_details array")
    return await _reference_stable(run, wire, opened.arguments, hints[0], notes)


def _challenge(reply: Reply, evidence: list[str]) -> str:
    challenge = reply.headers.get("www-authenticate", "")
    evidence.append(f"WWW-Authenticate: {challenge[:200]}")
    error = re.search(r'error="?([a-z_]+)"?', challenge)
    if error is None or error.group(1) not in _CHALLENGES:
        raise Failed(f"HTTP {reply.status} with no insufficient_scope or insufficient_authorization challenge")
    parameter = _CHALLENGES[error.group(1)]
    if f"{parameter}=" not in challenge:
        raise Failed(f"the {error.group(1)} challenge does not carry its remedy in {parameter}")
    return f"HTTP {reply.status}, {error.group(1)} with {parameter}"


async def _reference_stable(
    run: CheckRun, wire: Wire, arguments: dict[str, Any], hint: dict[str, Any], notes: list[str]
) -> str:
    """The same call again gets the same ``authorization_reference`` (else a note: it is recommended)."""
    reference = hint.get("authorization_reference")
    if reference is None:
        return "an available envelope with authorization_details"
    if not isinstance(reference, str):
        raise Failed(f"authorization_reference is {reference!r}, not a string")
    again = await wire.call(run.options.tool, arguments)
    other = [h for h in _hints(envelope(again.result if again.has_result else {})) if h.get("type") == hint["type"]]
    if other and other[0].get("authorization_reference") != reference:
        notes.append("the authorization_reference changed for an equivalent call (SEP-2643 recommends it stable)")
    return "an available envelope with authorization_details and a reference"
