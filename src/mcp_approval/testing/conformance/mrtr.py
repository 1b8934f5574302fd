"""Fixtures of the ``input-required-result-*`` scenarios (SEP-2322, multi-round-trip requests).

Each fixture returns an ``InputRequiredResult`` until the retry carries the answers it asked for.
The SDK seals every ``requestState`` (AES-GCM) before it leaves the server and opens it on the
retry, so the fixtures see plaintext and a tampered state never reaches them (``-32602``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import mcp_types as types
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.prompts import Prompt
from mcp.shared.exceptions import MCPError

from mcp_approval.protocol import INVALID_PARAMS
from mcp_approval.testing.conformance._common import (
    AnyContext,
    accepted_content,
    declares,
    elicit_request,
    response_for,
    roots_request,
    sampling_request,
)

__all__ = ["MRTR_TOOLS", "register"]

_ASK_NAME = elicit_request("What is your name?", {"name": "string"})
_ASK_CONFIRM = elicit_request("Please confirm", {"ok": "boolean"})


def _missing(ctx: AnyContext, requests: Mapping[str, types.InputRequest]) -> dict[str, types.InputRequest]:
    """The requests of ``requests`` this retry did not answer."""
    return {key: request for key, request in requests.items() if response_for(ctx, key) is None}


def _sampled_text(answer: types.InputResponse | None) -> str:
    content = getattr(answer, "content", None)
    return content.text if isinstance(content, types.TextContent) else "(no text)"


def _root_uris(answer: types.InputResponse | None) -> list[str]:
    roots = answer.roots if isinstance(answer, types.ListRootsResult) else []
    return [str(root.uri) for root in roots]


def _check_state(ctx: AnyContext, expected: str) -> None:
    if ctx.request_state != expected:
        raise MCPError(code=INVALID_PARAMS, message="Invalid or unexpected requestState")


async def test_input_required_result_elicitation(ctx: AnyContext) -> str | types.InputRequiredResult:
    """Asks the user's name (``user_name``), then greets them."""
    content = accepted_content(ctx, "user_name")
    if content is None:
        return types.InputRequiredResult(input_requests={"user_name": _ASK_NAME})
    return f"Hello, {content.get('name', 'stranger')}!"


async def test_input_required_result_sampling(ctx: AnyContext) -> str | types.InputRequiredResult:
    """Asks the client's model a question (``capital_question``), then returns its answer."""
    answer = response_for(ctx, "capital_question")
    if answer is None:
        request = sampling_request("What is the capital of France?", 100)
        return types.InputRequiredResult(input_requests={"capital_question": request})
    return f"Model answered: {_sampled_text(answer)}"


async def test_input_required_result_list_roots(ctx: AnyContext) -> str | types.InputRequiredResult:
    """Asks for the client's roots (``client_roots``), then lists them."""
    answer = response_for(ctx, "client_roots")
    if answer is None:
        return types.InputRequiredResult(input_requests={"client_roots": roots_request()})
    return f"Client roots: {', '.join(_root_uris(answer)) or '(none)'}"


async def test_input_required_result_request_state(ctx: AnyContext) -> str | types.InputRequiredResult:
    """Asks for a confirmation with a ``requestState`` and checks the echoed state on the retry."""
    state = "confirm-round-1"
    if accepted_content(ctx, "confirm") is None:
        return types.InputRequiredResult(input_requests={"confirm": _ASK_CONFIRM}, request_state=state)
    _check_state(ctx, state)
    return "state-ok: the echoed request state verified."


async def test_input_required_result_multiple_inputs(ctx: AnyContext) -> str | types.InputRequiredResult:
    """Asks for an elicitation, a sampling and a roots answer at once; completes when all arrived."""
    state = "multiple-inputs"
    requests: dict[str, types.InputRequest] = {
        "user_name": _ASK_NAME,
        "greeting": sampling_request("Generate a greeting", 50),
        "client_roots": roots_request(),
    }
    missing = _missing(ctx, requests)
    if missing:
        return types.InputRequiredResult(input_requests=missing, request_state=state)
    _check_state(ctx, state)
    name = (accepted_content(ctx, "user_name") or {}).get("name")
    return f"All inputs answered: name={name}, greeting={_sampled_text(response_for(ctx, 'greeting'))}"


async def test_input_required_result_multi_round(ctx: AnyContext) -> str | types.InputRequiredResult:
    """Two rounds: the name (``step1``), then a favourite colour (``step2``), with evolving state."""
    state = ctx.request_state or ""
    step2 = accepted_content(ctx, "step2")
    if state.startswith("round-2:") and step2 is not None:
        return f"Both rounds answered: {state.removeprefix('round-2:')} likes {step2.get('color')}."
    step1 = accepted_content(ctx, "step1")
    if state == "round-1" and step1 is not None:
        ask = elicit_request("Step 2: What is your favorite color?", {"color": "string"})
        return types.InputRequiredResult(input_requests={"step2": ask}, request_state=f"round-2:{step1.get('name')}")
    ask = elicit_request("Step 1: What is your name?", {"name": "string"})
    return types.InputRequiredResult(input_requests={"step1": ask}, request_state="round-1")


async def test_input_required_result_tampered_state(ctx: AnyContext) -> str | types.InputRequiredResult:
    """Round-trips an integrity-protected ``requestState``; the SDK rejects a tampered one."""
    state = "tamper-check"
    if accepted_content(ctx, "confirm") is None:
        return types.InputRequiredResult(input_requests={"confirm": _ASK_CONFIRM}, request_state=state)
    _check_state(ctx, state)
    return "Request state verified; the call is complete."


def _declared_requests(ctx: AnyContext) -> dict[str, types.InputRequest]:
    requests: dict[str, types.InputRequest] = {}
    if declares(ctx, "elicitation"):
        requests["user_name"] = _ASK_NAME
    if declares(ctx, "sampling"):
        requests["greeting"] = sampling_request("Generate a greeting", 50)
    if declares(ctx, "roots"):
        requests["client_roots"] = roots_request()
    return requests


async def test_input_required_result_capabilities(ctx: AnyContext) -> str | types.InputRequiredResult:
    """Asks only for the kinds of input this request's client capabilities declare."""
    requests = _declared_requests(ctx)
    if not requests:
        return "No input capability declared; nothing to ask."
    missing = _missing(ctx, requests)
    if missing:
        return types.InputRequiredResult(input_requests=missing)
    return f"Declared-capability inputs answered: {', '.join(sorted(requests))}."


async def test_input_required_result_prompt(ctx: AnyContext) -> str | types.InputRequiredResult:
    """A prompt that first asks which context to use (``user_context``)."""
    content = accepted_content(ctx, "user_context")
    if content is None:
        ask = elicit_request("What context should the prompt use?", {"context": "string"})
        return types.InputRequiredResult(input_requests={"user_context": ask})
    return f"Write a short summary using this context: {content.get('context')}"


MRTR_TOOLS: tuple[Callable[..., Any], ...] = (
    test_input_required_result_elicitation,
    test_input_required_result_sampling,
    test_input_required_result_list_roots,
    test_input_required_result_request_state,
    test_input_required_result_multiple_inputs,
    test_input_required_result_multi_round,
    test_input_required_result_tampered_state,
    test_input_required_result_capabilities,
)


def register(server: MCPServer[Any]) -> list[str]:
    """Register the MRTR tool fixtures and the MRTR prompt; return the tool names."""
    for fn in MRTR_TOOLS:
        server.add_tool(fn, structured_output=False)
    server.add_prompt(Prompt.from_function(test_input_required_result_prompt))
    return [fn.__name__ for fn in MRTR_TOOLS]
