"""What the kit does out of band: decide a request, change policy, and read what the gated tool did.

Commands run without a shell. The values they are told (the decision, the tool, the call's
arguments, the server's task id) fill words of their own in the command (``{task_id}``) and are
in its environment (``MCP_CHECK_TASK_ID``), so nothing a server sends reaches a shell string. What
a command prints is read up to :data:`MAX_OUTPUT_BYTES`, and it runs for at most the kit's
``--timeout``.

A decider prints, one per line, the backend's identifiers of the request it decided: no answer of
the run may carry them. The witness shows the gated tool's executions (see :mod:`witness`).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from mcp_approval.checks.options import CheckInputError, CheckOptions
from mcp_approval.checks.witness import Executions, executions_in

__all__ = [
    "MAX_OUTPUT_BYTES",
    "NOT_YET_EXIT",
    "Decided",
    "PolicyAction",
    "change_policy",
    "decide",
    "preflight",
    "run_command",
]

Decision = Literal["approve", "deny"]
#: ``deny-call``: the pending call's next evaluation denies; ``revoke-principal``: the principal of
#: ``--token`` is no longer valid; ``restore``: undo both.
PolicyAction = Literal["deny-call", "revoke-principal", "restore"]
#: The pause between two tries of a decider that found nothing to decide yet.
_RETRY_S = 0.2
#: The exit status of a decide command that found no such pending request (yet): ``EX_TEMPFAIL``.
NOT_YET_EXIT = 75
#: The most of a command's output the kit reads (the rest is discarded).
MAX_OUTPUT_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class Decided:
    """How a decision (or a policy change) went: ``ok``, the backend identifiers named, and what was said."""

    ok: bool
    backend_ids: tuple[str, ...]
    detail: str
    #: The decider found no such pending request: it may appear shortly (the only failure retried).
    not_yet: bool = False


@dataclass(frozen=True)
class Ran:
    """A finished command: its exit status and what it printed (each at most the cap)."""

    code: int
    out: str
    err: str


async def _read_capped(stream: asyncio.StreamReader | None) -> bytes:
    """Everything ``stream`` yields, of which the first :data:`MAX_OUTPUT_BYTES` are kept."""
    kept = bytearray()
    while stream is not None and (chunk := await stream.read(65536)):
        kept.extend(chunk[: max(0, MAX_OUTPUT_BYTES - len(kept))])
    return bytes(kept)


async def run_command(argv: Sequence[str], env: dict[str, str], timeout_s: float) -> Ran:
    """Run ``argv`` (no shell) with ``env`` added to the kit's environment, for at most ``timeout_s``."""
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, **env},
        )
    except OSError as exc:
        return Ran(-1, "", f"cannot run {argv[0]}: {exc.strerror or exc}")
    reading = asyncio.gather(_read_capped(process.stdout), _read_capped(process.stderr), process.wait())
    try:
        out, err, code = await asyncio.wait_for(reading, timeout_s)
    except TimeoutError:
        return Ran(-1, "", f"{argv[0]} did not finish within {timeout_s:g}s")
    finally:
        if process.returncode is None:  # timed out, or the run was cancelled: never leave it running
            process.kill()
            await asyncio.shield(process.wait())
    return Ran(code, out.decode(errors="replace"), err.decode(errors="replace"))


def _filled(argv: Sequence[str], values: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The command with each ``{name}`` word replaced by its value, and the ``MCP_CHECK_*`` environment."""
    words = [values.get(word[1:-1], word) if word.startswith("{") and word.endswith("}") else word for word in argv]
    return words, {f"MCP_CHECK_{key.upper()}": value for key, value in values.items()}


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


@dataclass(frozen=True)
class Call:
    """What a decider or the policy hook is told of one call."""

    arguments: dict[str, Any]
    nonce: str
    task_id: str = ""


async def decide(
    options: CheckOptions, decision: Decision, call: Call, *, comment: str = "", retry: bool = True
) -> Decided:
    """Record ``decision`` on the approval request of ``call``, with ``comment``.

    With ``retry``, a decider that found no such pending request is tried again until
    ``timeout_s``: a server may submit the request a moment after it answered (e.g. once the
    task's input is in). Any other failure is final.
    """
    deadline = asyncio.get_running_loop().time() + options.timeout_s
    while True:
        decided = await _decide_once(options, decision, call, comment)
        if not decided.not_yet or not retry or asyncio.get_running_loop().time() > deadline:
            return decided
        await asyncio.sleep(_RETRY_S)


async def _decide_once(options: CheckOptions, decision: Decision, call: Call, comment: str) -> Decided:
    if options.review_config is not None:
        return await _decide_by_review(options, decision, call.arguments, comment)
    assert options.decide_command is not None
    values = {
        "decision": decision,
        "tool": options.tool,
        "arguments": json.dumps(call.arguments, sort_keys=True),
        "nonce": call.nonce,
        "task_id": call.task_id,
        "comment": comment,
        "reviewer": options.reviewer or "",
    }
    ran = await run_command(*_filled(options.decide_command, values), options.timeout_s)
    ids = tuple(line.strip() for line in ran.out.splitlines() if line.strip())
    if ran.code != 0:
        said = _last_line(ran.err) or _last_line(ran.out)
        return Decided(False, ids, f"decider exited {ran.code}: {said}", not_yet=ran.code == NOT_YET_EXIT)
    done = "approved" if decision == "approve" else "denied"
    return Decided(True, ids, f"decider {done} the request" + (f" {ids[-1]}" if ids else ""))


async def _decide_by_review(
    options: CheckOptions, decision: Decision, arguments: dict[str, Any], comment: str
) -> Decided:
    """What ``mcp-approval review list`` then ``review approve|deny ID`` do, run in this process.

    In this process rather than as two commands per decision: each would load the configuration
    and the store anew (more than a second apiece), and a run makes several decisions.
    """
    config, reviewer, decider = options.review_config, options.reviewer, options.review_decider
    assert config is not None
    assert reviewer is not None
    assert decider is not None
    try:
        found = await asyncio.to_thread(decider, config, options.tool, arguments, reviewer, decision, comment)
    except RuntimeError as exc:
        return Decided(False, (), str(exc))
    if found is None:
        shown = json.dumps(arguments, sort_keys=True)
        return Decided(False, (), f"mcp-approval review: no pending request for {options.tool} {shown}", not_yet=True)
    return Decided(True, (found,), f"mcp-approval review {decision} {found} --as {reviewer}")


async def change_policy(options: CheckOptions, action: PolicyAction, call: Call | None = None) -> Decided:
    """Run ``--policy-command`` for ``action`` (on ``call``, for the principal of ``--token``)."""
    assert options.policy_command is not None
    values = {
        "action": action,
        "tool": options.tool,
        "token": options.token,
        "arguments": "{}",
        "nonce": "",
        "task_id": "",
    }
    if call is not None:
        values.update(arguments=json.dumps(call.arguments, sort_keys=True), nonce=call.nonce, task_id=call.task_id)
    ran = await run_command(*_filled(options.policy_command, values), options.timeout_s)
    if ran.code != 0:
        said = _last_line(ran.err) or _last_line(ran.out)
        return Decided(False, (), f"policy command {action} exited {ran.code}: {said}")
    return Decided(True, (), f"policy command: {action}")


async def witness_command(options: CheckOptions, nonce: str) -> Executions:
    """The executions ``--witness-command`` shows for ``nonce``.

    Raises:
        RuntimeError: the command failed.
    """
    assert options.witness_command is not None
    ran = await run_command(*_filled(options.witness_command, {"nonce": nonce}), options.timeout_s)
    if ran.code != 0:
        raise RuntimeError(f"the witness command exited {ran.code}: {_last_line(ran.err)}")
    return executions_in(ran.out, nonce)


async def preflight(options: CheckOptions, witness: Callable[[str], Awaitable[Executions]]) -> list[str]:
    """Try the decider, the witness and the policy hook once on a call never made: bad input otherwise.

    ``witness(nonce)`` reads the witness. A decider must answer "no such request" (exit 75);
    the witness must show no execution; the policy hook must ``restore``.

    Raises:
        CheckInputError: one of them failed (one line naming it).
    """
    nonce = "chk" + secrets.token_hex(6)
    try:
        shown = await witness(nonce)
    except (RuntimeError, OSError) as exc:
        option = "--witness-tool" if options.witness_tool else "--witness-command"
        raise CheckInputError(f"{option} failed before the run: {exc}") from None
    if shown.count:
        raise CheckInputError(f"the witness shows {shown.count} execution(s) of a call never made (nonce {nonce})")
    never_made = Call(options.arguments, nonce)
    decided = await decide(options, "deny", never_made, retry=False)
    if not decided.not_yet:
        option = "--review-config" if options.review_config else "--decide"
        why = "it claimed to decide a request for a call never made" if decided.ok else decided.detail
        raise CheckInputError(f"{option} failed before the run: {why}")
    checked = ["witness: answers, and shows no execution of a call never made", "decider: answers 'no such request'"]
    if options.policy_command is not None:
        restored = await change_policy(options, "restore")
        if not restored.ok:
            raise CheckInputError(f"--policy-command failed before the run: {restored.detail}")
        checked.append("policy command: restore succeeds")
    return checked
