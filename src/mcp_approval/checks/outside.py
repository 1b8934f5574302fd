"""What the kit does out of band: decide an approval request, and read the gated tool's effects.

A decider is told the decision and enough to find the request (tool, arguments, the nonce, the
task id); whatever identifiers it prints on stdout are the backend's, and must never reach the
client. The witness shows the effects of the gated tool; the kit counts a call's nonce in it.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from mcp_approval.checks.options import CheckOptions
from mcp_approval.checks.wire import Wire

__all__ = ["NOT_YET_EXIT", "Decided", "decide", "executions"]

Decision = Literal["approve", "deny"]
#: The pause between two tries of a decider that found nothing to decide yet.
_RETRY_S = 0.2
#: The exit status of a decide command that found no such pending request (yet): ``EX_TEMPFAIL``.
NOT_YET_EXIT = 75


@dataclass(frozen=True)
class Decided:
    """How a decision went: ``ok``, the backend identifiers the decider named, and what it said."""

    ok: bool
    backend_ids: tuple[str, ...]
    detail: str
    #: The decider found no such pending request: it may appear shortly (the only failure retried).
    not_yet: bool = False


async def _run(argv: Sequence[str], env: dict[str, str], timeout_s: float) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **env},
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout_s)
    except TimeoutError:
        process.kill()
        await process.wait()
        return -1, "", f"{argv[0]} did not finish within {timeout_s:g}s"
    assert process.returncode is not None
    return process.returncode, out.decode(errors="replace"), err.decode(errors="replace")


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


async def decide(
    options: CheckOptions,
    decision: Decision,
    arguments: dict[str, Any],
    nonce: str,
    task_id: str,
    *,
    retry: bool = True,
) -> Decided:
    """Record ``decision`` on the approval request of the call with ``arguments``.

    With ``retry``, a decider that found no such pending request is tried again until
    ``timeout_s``: a server may submit the request a moment after it answered (e.g. once the
    task's input is in). Any other failure is final.
    """
    deadline = asyncio.get_running_loop().time() + options.timeout_s
    while True:
        decided = await _decide_once(options, decision, arguments, nonce, task_id)
        if not decided.not_yet or not retry or asyncio.get_running_loop().time() > deadline:
            return decided
        await asyncio.sleep(_RETRY_S)


async def _decide_once(
    options: CheckOptions, decision: Decision, arguments: dict[str, Any], nonce: str, task_id: str
) -> Decided:
    if options.review_config is not None:
        return await _decide_by_review(options, decision, arguments)
    assert options.decide_command is not None
    values = {
        "decision": decision,
        "tool": options.tool,
        "arguments": json.dumps(arguments, sort_keys=True),
        "nonce": nonce,
        "task_id": task_id,
    }
    argv = [part.format_map(values) for part in options.decide_command]
    env = {f"MCP_CHECK_{key.upper()}": value for key, value in values.items()}
    code, out, err = await _run(argv, env, options.timeout_s)
    ids = tuple(line.strip() for line in out.splitlines() if line.strip())
    if code != 0:
        said = _last_line(err) or _last_line(out)
        return Decided(False, ids, f"decider exited {code}: {said}", not_yet=code == NOT_YET_EXIT)
    done = "approved" if decision == "approve" else "denied"
    return Decided(True, ids, f"decider {done} the request" + (f" {ids[-1]}" if ids else ""))


async def _decide_by_review(options: CheckOptions, decision: Decision, arguments: dict[str, Any]) -> Decided:
    """What ``mcp-approval review list`` then ``review approve|deny ID`` do, run in this process.

    In this process rather than as two commands per decision: each would load the configuration
    and the store anew (more than a second apiece), and a run makes several decisions.
    """
    config, reviewer, decider = options.review_config, options.reviewer, options.review_decider
    assert config is not None
    assert reviewer is not None
    assert decider is not None
    try:
        found = await asyncio.to_thread(decider, config, options.tool, arguments, reviewer, decision)
    except RuntimeError as exc:
        return Decided(False, (), str(exc))
    if found is None:
        shown = json.dumps(arguments, sort_keys=True)
        return Decided(False, (), f"mcp-approval review: no pending request for {options.tool} {shown}", not_yet=True)
    return Decided(True, (found,), f"mcp-approval review {decision} {found} --as {reviewer}")


async def executions(options: CheckOptions, wire: Wire, nonce: str) -> int:
    """How many times the witness shows an execution carrying ``nonce``."""
    if options.witness_tool is not None:
        answer = await wire.call(options.witness_tool, {})
        result = answer.result or {}
        if answer.error is not None or result.get("isError"):
            raise RuntimeError(f"the witness tool {options.witness_tool} failed: {answer.brief()}")
        # structuredContent when there is one: the content usually repeats it as text.
        shown = result.get("structuredContent")
        if shown is None:
            shown = [item.get("text", "") for item in result.get("content", []) if isinstance(item, dict)]
        return json.dumps(shown).count(nonce)
    assert options.witness_command is not None
    code, out, err = await _run(options.witness_command, {"MCP_CHECK_NONCE": nonce}, options.timeout_s)
    if code != 0:
        raise RuntimeError(f"the witness command exited {code}: {_last_line(err)}")
    return out.count(nonce)
