"""One run of the kit against a server: two principals' wires, every call it made, and the steps
scenarios share (open a gated call as a task, answer its input, poll it, decide it, read the witness).

The run keeps a register of every gated call, so that it can stop calling the tool the moment it
sees it run without approval (:class:`~mcp_approval.checks.report.StopRun`), and so that at the
end it can cancel, or deny out of band, whatever it left pending.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from mcp_approval.checks import outside
from mcp_approval.checks.judge import PENDING, TERMINAL, body_text, member
from mcp_approval.checks.options import CheckOptions, fill
from mcp_approval.checks.report import Failed, StopRun
from mcp_approval.checks.wire import Reply, Transcript, Wire
from mcp_approval.checks.witness import Executions, from_tool_result
from mcp_approval.protocol import METHOD_ELICITATION_CREATE, RESULT_TYPE_INPUT_REQUIRED, RESULT_TYPE_TASK

__all__ = ["CheckRun", "Opened"]

#: The longest the kit waits between two polls, whatever ``pollIntervalMs`` says (a check must end).
_MAX_POLL_S = 1.0
#: At most this many ``input_required`` rounds on one ``tools/call`` (SEP-2322 allows several).
_MAX_ROUNDS = 3
_ANSWER_TEXT = "Checked by mcp-approval check"
Template = Literal["arguments", "changed", "denied", "failing"]


@dataclass
class Opened:
    """A gated call the run made: its wire, arguments, nonce and, when it became one, its task."""

    wire: Wire
    arguments: dict[str, Any]
    nonce: str
    task_id: str | None = None
    created: dict[str, Any] = field(default_factory=dict)
    #: ``"before"`` (an ``input_required`` round on ``tools/call``), ``"during"`` (``tasks/update``).
    input_rounds: list[str] = field(default_factory=list)
    #: The ``input_required`` results of the rounds on ``tools/call``, and the input requests of the task.
    mrtr_results: list[dict[str, Any]] = field(default_factory=list)
    task_inputs: list[dict[str, Any]] = field(default_factory=list)
    update_acks: list[Reply] = field(default_factory=list)
    #: The task as ``tasks/get`` showed it after one of several keys was answered.
    partial: dict[str, Any] | None = None
    #: The request id of the ``tools/call`` that created the task, and the ``tasks/get`` right after it.
    request_id: int | None = None
    first_read: Reply | None = None
    poll_s: float = 0.5
    #: The last status the run saw (``None``: never a task, or not yet read).
    status: str | None = None
    decided: list[str] = field(default_factory=list)


@dataclass
class CheckRun:
    """The wires of the two principals and everything the run learned along the way."""

    options: CheckOptions
    one: Wire
    other: Wire
    #: Every answer of the run (both wires write to it), for the scenarios that judge the run as a whole.
    transcript: Transcript
    #: Identifiers the decider named: the backend's, never to be seen by the client.
    backend_ids: set[str] = field(default_factory=set)
    #: The comments the kit's decisions carried: never to be quoted in a statusMessage.
    comments: set[str] = field(default_factory=set)
    extensions: dict[str, Any] = field(default_factory=dict)
    calls: list[Opened] = field(default_factory=list)
    #: The first pending task (requestable-denial), a call approved and executed, a call denied.
    pending: Opened | None = None
    approved: Opened | None = None
    approved_task: dict[str, Any] = field(default_factory=dict)
    denied: Opened | None = None
    denied_task: dict[str, Any] = field(default_factory=dict)
    #: Set once the gated tool ran without approval: no scenario calls it again.
    stopped: str | None = None

    # -- calls --------------------------------------------------------------------------------

    def nonce(self) -> str:
        """A value no other call of any run shares."""
        return "chk" + secrets.token_hex(6)

    def arguments(self, nonce: str, template: Template = "arguments") -> dict[str, Any]:
        """The arguments of the gated call (or of one of its variants) for ``nonce``."""
        chosen = {
            "arguments": self.options.arguments,
            "changed": self.options.changed_arguments,
            "denied": self.options.denied_arguments,
            "failing": self.options.failing_arguments,
        }[template]
        value: dict[str, Any] = fill(chosen, nonce)
        return value

    def register(self, wire: Wire, arguments: dict[str, Any], nonce: str) -> Opened:
        """A call about to be made, in the run's register (for the cleanup and the stop rule)."""
        if self.stopped is not None:
            raise StopRun(self.stopped)
        opened = Opened(wire, arguments, nonce)
        self.calls.append(opened)
        return opened

    async def call(self, opened: Opened, *, tasks: bool = True, extra: dict[str, Any] | None = None) -> Reply:
        """``tools/call`` of the gated tool, answering ``input_required`` rounds (SEP-2322) if asked."""
        reply = await opened.wire.call(self.options.tool, opened.arguments, tasks=tasks, extra=extra)
        for _ in range(_MAX_ROUNDS):
            result = reply.result if reply.has_result else {}
            if result.get("resultType") != RESULT_TYPE_INPUT_REQUIRED:
                break
            opened.input_rounds.append("before")
            opened.mrtr_results.append(result)
            responses = self.answers(result.get("inputRequests"))
            retry = {"inputResponses": responses, "requestState": result.get("requestState")}
            reply = await opened.wire.call(self.options.tool, opened.arguments, tasks=tasks, extra=retry)
        return reply

    async def open(self, wire: Wire, arguments: dict[str, Any], nonce: str) -> Opened:
        """Call the gated tool declaring tasks and answer any input request, until a task exists."""
        opened = self.register(wire, arguments, nonce)
        reply = await self.call(opened)
        result = reply.result if reply.has_result else {}
        if result.get("resultType") != RESULT_TYPE_TASK or not isinstance(result.get("taskId"), str):
            await self.check_not_run(opened, "the gated call answered without a task")
            said = body_text(result)[:200]
            raise Failed(f"the gated call did not return a task: {reply.brief()}" + (f": {said!r}" if said else ""))
        opened.task_id, opened.created = result["taskId"], result
        opened.status, opened.poll_s = str(result.get("status")), _poll_s(result)
        opened.request_id = reply.request_id
        # At once: SEP-2663 has the task readable before the CreateTaskResult is sent.
        opened.first_read = await wire.get(opened.task_id)
        if result.get("status") == "input_required":
            await self.answer_in_task(opened)
        return opened

    async def fresh(self, evidence: list[str], *, wire: Wire | None = None, template: Template = "arguments") -> Opened:
        """A fresh gated call, now a pending task that has not run (the run stops if it ran)."""
        nonce = self.nonce()
        opened = await self.open(wire or self.one, self.arguments(nonce, template), nonce)
        evidence.append(f"tools/call {self.options.tool} {opened.arguments} -> task {opened.task_id}")
        await self.check_not_run(opened, "a call that became a task")
        return opened

    async def decided(
        self, evidence: list[str], decision: Literal["approve", "deny"], *, template: Template = "arguments"
    ) -> tuple[Opened, dict[str, Any]]:
        """A fresh gated call, decided out of band, and its task once terminal."""
        opened = await self.fresh(evidence, template=template)
        decided = await self.decide(opened, decision)
        evidence.append(decided.detail)
        if not decided.ok:
            raise Failed(f"could not {decision} out of band: {decided.detail}")
        return opened, await self.settled(opened)

    async def check_not_run(self, opened: Opened, where: str, *, before: int = 0) -> int:
        """The executions the witness shows of ``opened``'s nonce; stop the run when there are more
        than ``before`` though nobody approved ``opened``."""
        runs = (await self.executions(opened.nonce)).count
        if runs > before and "approve" not in opened.decided:
            self.stop_unapproved(opened, runs - before, where)
        return runs

    def stop_unapproved(self, opened: Opened, runs: int, where: str) -> None:
        """Raise :class:`StopRun`: ``opened`` ran ``runs`` time(s) with no approval of its own."""
        tool = self.options.tool
        first = not any("approve" in call.decided for call in self.calls)
        verdict = (
            f"this server does not gate {tool}: {where} ({opened.arguments}) ran {runs} time(s) without approval"
            if first
            else f"{tool} ran {runs} time(s) without an approval of its own: {where} ({opened.arguments})"
        )
        self.stopped = f"{verdict}; the kit calls {tool} no more"
        raise StopRun(self.stopped)

    # -- input --------------------------------------------------------------------------------

    async def answer_in_task(self, opened: Opened) -> None:
        """Answer a task's outstanding ``inputRequests`` through ``tasks/update``, until it moves on.

        With two keys or more outstanding, the first is answered alone first (the partial answer
        SEP-2663 allows), and what the task then lists is kept for the input scenario.
        """
        assert opened.task_id is not None
        deadline = time.monotonic() + self.options.timeout_s
        answered: set[str] = set()
        for _ in range(_MAX_ROUNDS):
            task = await self.status(opened.wire, opened.task_id)
            while task.get("status") == "input_required" and set(_keys(task)) <= answered:
                if time.monotonic() > deadline:
                    raise Failed(f"the task is still input_required {self.options.timeout_s:g}s after tasks/update")
                await asyncio.sleep(opened.poll_s)
                task = await self.status(opened.wire, opened.task_id)
            if task.get("status") != "input_required":
                return
            opened.input_rounds.append("during")
            opened.task_inputs.append(task)
            outstanding = {k: v for k, v in self.answers(task.get("inputRequests")).items() if k not in answered}
            if len(outstanding) > 1:
                first = next(iter(outstanding))
                await self._update(opened, {first: outstanding.pop(first)})
                answered.add(first)
                opened.partial = await self.status(opened.wire, opened.task_id)
            await self._update(opened, outstanding)
            answered.update(outstanding)
        raise Failed(f"the task asked for input more than {_MAX_ROUNDS} times")

    async def _update(self, opened: Opened, responses: dict[str, Any]) -> None:
        assert opened.task_id is not None
        ack = await opened.wire.update(opened.task_id, responses)
        opened.update_acks.append(ack)
        if ack.is_error:
            raise Failed(f"tasks/update answering the task's input was refused: {ack.brief()}")

    def answers(self, requests: Any) -> dict[str, Any]:
        """An accepting answer to each form request (the operator's content, or a sentence per field)."""
        if not isinstance(requests, dict) or not requests:
            raise Failed(f"input_required without inputRequests: {str(requests)[:200]}")
        responses: dict[str, Any] = {}
        for key, request in requests.items():
            if not isinstance(request, dict) or request.get("method") != METHOD_ELICITATION_CREATE:
                raise Failed(f"input request {key!r} is not an elicitation/create form: {str(request)[:200]}")
            params = member(request, "params")
            if params.get("mode", "form") != "form":
                raise Failed(
                    f"input request {key!r} asks for {params.get('mode')!r} mode, which the kit did not declare"
                )
            schema = member(params, "requestedSchema")
            content = self.options.input_answer or _content_for(schema)
            responses[key] = {"action": "accept", "content": content}
        return responses

    # -- reading tasks and effects ----------------------------------------------------------------

    async def status(self, wire: Wire, task_id: str) -> dict[str, Any]:
        """``tasks/get`` of a task the wire's principal owns (:class:`Failed` when it is refused)."""
        reply = await wire.get(task_id)
        if not reply.has_result:
            raise Failed(f"tasks/get of its own task {task_id} answered {reply.brief()}")
        for opened in self.calls:
            if opened.task_id == task_id:
                opened.status = str(reply.result.get("status"))
        return reply.result

    async def settled(self, opened: Opened) -> dict[str, Any]:
        """Poll ``tasks/get`` (at the interval the server asks, at most 1 s) until the task is terminal."""
        assert opened.task_id is not None
        deadline = time.monotonic() + self.options.timeout_s
        while True:
            task = await self.status(opened.wire, opened.task_id)
            if task.get("status") in TERMINAL:
                return task
            if time.monotonic() > deadline:
                raise Failed(f"task {opened.task_id} still {task.get('status')} after {self.options.timeout_s:g}s")
            await asyncio.sleep(opened.poll_s)

    async def watch(self, wire: Wire, task_id: str, poll_s: float) -> list[str]:
        """The statuses ``tasks/get`` reports over the settle window (a late execution shows there)."""
        seen: list[str] = []
        deadline = time.monotonic() + self.options.settle_s
        while True:
            status = str((await self.status(wire, task_id)).get("status"))
            if not seen or seen[-1] != status:
                seen.append(status)
            if time.monotonic() > deadline:
                return seen
            await asyncio.sleep(max(0.05, min(poll_s, self.options.settle_s / 4)))

    async def executions(self, nonce: str) -> Executions:
        """The executions of the call with ``nonce`` the witness shows."""
        if self.options.witness_tool is None:
            return await outside.witness_command(self.options, nonce)
        reply = await self.one.call(self.options.witness_tool, {})
        if not reply.has_result or reply.result.get("isError"):
            raise RuntimeError(f"the witness tool {self.options.witness_tool} failed: {reply.brief()}")
        return from_tool_result(reply.result, nonce)

    async def decide(
        self, opened: Opened, decision: Literal["approve", "deny"], *, retry: bool = True
    ) -> outside.Decided:
        """Decide ``opened``'s request out of band, with a fresh comment no statusMessage may quote."""
        comment = "kit-comment-" + secrets.token_hex(6)
        self.comments.add(comment)
        call = outside.Call(opened.arguments, opened.nonce, opened.task_id or "")
        decided = await outside.decide(self.options, decision, call, comment=comment, retry=retry)
        self.backend_ids.update(decided.backend_ids)
        if decided.ok:
            opened.decided.append(decision)
        return decided

    # -- the end of the run -------------------------------------------------------------------

    async def cancel(self, opened: Opened) -> Reply:
        """``tasks/cancel`` of ``opened``'s task (its status is read again before the run ends)."""
        assert opened.task_id is not None
        opened.status = None
        return await opened.wire.cancel(opened.task_id)

    async def cleanup(self) -> list[str]:
        """Cancel every task the run left pending, and deny out of band every request that stays open:
        a call that never became a task, or whose task was cancelled (a backend that cannot withdraw a
        request keeps it pending; the server then only ignores it). Say what was done."""
        if self.options.policy_command is not None:
            await outside.change_policy(self.options, "restore")
        cancelled: list[str] = []
        denied: list[str] = []
        open_still: list[str] = []
        for opened in self.calls:
            if opened.task_id is not None and opened.status not in TERMINAL:
                with contextlib.suppress(Exception):  # the server may be what failed
                    await self.status(opened.wire, opened.task_id)
                if opened.status not in TERMINAL:
                    with contextlib.suppress(Exception):
                        await opened.wire.cancel(opened.task_id)
                        await self.status(opened.wire, opened.task_id)
                    if opened.status in TERMINAL:
                        cancelled.append(opened.task_id)
            if opened.task_id is not None and opened.status in ("completed", "failed"):
                continue  # decided, or ended: no request of it is open
            decided = await self.decide(opened, "deny", retry=False)
            if decided.ok:
                denied.append(str(opened.arguments))
            elif opened.task_id is not None and opened.status in PENDING:
                open_still.append(f"task {opened.task_id} ({opened.status})")
        return _cleanup_lines(cancelled, denied, open_still)


def _cleanup_lines(cancelled: list[str], denied: list[str], open_still: list[str]) -> list[str]:
    lines = []
    if cancelled:
        lines.append(f"cancelled {len(cancelled)} task(s) the run left pending: {', '.join(cancelled)}")
    if denied:
        lines.append(f"denied out of band {len(denied)} request(s) the run left open: {'; '.join(denied)}")
    if open_still:
        lines.append(f"could not close {len(open_still)}: {', '.join(open_still)}")
    if not open_still:
        lines.append("nothing the run opened is pending")
    return lines


def _keys(task: dict[str, Any]) -> list[str]:
    requests = task.get("inputRequests")
    return list(requests) if isinstance(requests, dict) else []


def _poll_s(created: dict[str, Any]) -> float:
    interval = created.get("pollIntervalMs")
    if isinstance(interval, int | float) and not isinstance(interval, bool) and interval > 0:
        return min(interval / 1000, _MAX_POLL_S)
    return 0.5


def _content_for(schema: dict[str, Any]) -> dict[str, Any]:
    """A value for each required field of a flat form schema."""
    properties = member(schema, "properties")
    listed = schema.get("required")
    required = [str(name) for name in listed] if isinstance(listed, list) else list(properties)
    content: dict[str, Any] = {}
    for name in required:
        spec = member(properties, name)
        kind = spec.get("type", "string")
        if isinstance(spec.get("enum"), list) and spec["enum"]:
            content[name] = spec["enum"][0]
        elif kind in ("number", "integer"):
            content[name] = spec.get("minimum", 1)
        elif kind == "boolean":
            content[name] = True
        else:
            content[name] = _ANSWER_TEXT
    return content
