"""``ToolApproval``: a requestable denial becomes a durable, approvable task (SEP-2848).

Install it as the policy gate's requestable handler and as the tasks extension's handler for
approval tasks (the composition root does both), then start it after the tasks runtime::

    deps = ApprovalDependencies(store=ApprovalStore(database, audit=audit), backend=backend, pdp=pdp,
                                mapper=mapper, tools=ServerTools(server), cipher=cipher, options=options,
                                clock=clock, principal_valid=always_valid, task_store=tasks.store)
    driver = WorkflowDriver(deps, worker_id=tasks.runtime.worker_id)
    approval = ToolApproval(deps, driver=driver, tasks=tasks)
    tasks.register_handler(APPROVAL_HANDLER, approval)
    gate = PolicyGate(pdp, mapper=mapper, on_requestable=approval)

It answers each requestable denial: it binds the call the gate hands it (the
:class:`~mcp_approval.approval.creation.requestable.RequestableCall`) and passes it to
:class:`~mcp_approval.approval.creation.steps.TaskCreation`, which creates the approval task
crash-consistently, or, for a client without tasks, as ``ApprovalOptions.without_tasks`` says
(:mod:`~mcp_approval.approval.without_tasks`, which opens its requests through the same creation).
The :class:`~mcp_approval.approval.engine.driver.WorkflowDriver` follows every task from there.
"""

from __future__ import annotations

from typing import Any

from mcp.server.context import HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Extension, require_client_extension
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_approval.approval.binding import CallBinding
from mcp_approval.approval.creation.answers import CreationAnswers
from mcp_approval.approval.creation.requestable import RequestableCall, input_fields
from mcp_approval.approval.creation.steps import TaskCreation
from mcp_approval.approval.engine.dependencies import ApprovalDependencies, PrincipalCheck
from mcp_approval.approval.engine.driver import WorkflowDriver
from mcp_approval.approval.gate import DegradedRequestable, GatedCall
from mcp_approval.approval.persistence.records import APPROVAL_HANDLER
from mcp_approval.approval.without_tasks.flow import WithoutTasksFlow
from mcp_approval.approval.without_tasks.links import RequesterLinks
from mcp_approval.policy import Decision
from mcp_approval.protocol import TASKS_EXTENSION, TOOL_APPROVAL_EXTENSION
from mcp_approval.storage import StoreUnavailableError, jsonrpc_error
from mcp_approval.tasks.server import TasksExtension, declares_tasks

__all__ = ["APPROVAL_HANDLER", "PrincipalCheck", "ToolApproval", "ToolApprovalExtension"]


class ToolApprovalExtension(Extension):
    """Declares ``io.modelcontextprotocol/tool-approval`` in the server's capabilities (SEP-2848).

    The behaviour lives in :class:`ToolApproval` (the policy gate's requestable handler); this
    only advertises it, next to the tasks extension it builds on.
    """

    identifier = TOOL_APPROVAL_EXTENSION


class ToolApproval:
    """The SEP-2848 enforcement point: each call's answer, cancellation, and the workflow driver's lifecycle.

    It receives what the workflow runs with, built by the composition root in one phase: the
    :class:`~mcp_approval.approval.engine.dependencies.ApprovalDependencies` value (store,
    backend, policy, tools, cipher, options, clock) and the
    :class:`~mcp_approval.approval.engine.driver.WorkflowDriver` over them. :meth:`start` (after
    the tasks runtime, whose database the approval store shares) starts the backend and the
    driver. Register it for ``tasks/cancel`` and ``tasks/update`` on approval tasks with
    ``tasks.register_handler(APPROVAL_HANDLER, approval)``. Task creation itself is
    :attr:`creation`'s (:class:`~mcp_approval.approval.creation.steps.TaskCreation`).

    Args:
        deps: what the workflow runs with (its ``task_store`` is ``tasks``' store).
        driver: follows pending approvals to their end.
        tasks: the tasks extension whose store holds the approval tasks.
    """

    def __init__(self, deps: ApprovalDependencies, *, driver: WorkflowDriver, tasks: TasksExtension) -> None:
        self.deps = deps
        self.driver = driver
        self.tasks = tasks
        # Its collaborators by name, as read by the composition and the tests (``deps`` is frozen).
        self.store = deps.store
        self.backend = deps.backend
        self.pdp = deps.pdp
        self.mapper = deps.mapper
        self.tools = deps.tools
        self.options = deps.options
        self.cipher = deps.cipher
        self.clock = deps.clock
        self.principal_valid = deps.principal_valid
        self._running = False
        self._degraded = DegradedRequestable()
        self.links = RequesterLinks(deps.cipher, deps.options)
        answers = CreationAnswers(tasks=tasks, options=deps.options)
        #: Creates the approval tasks.
        self.creation = TaskCreation(
            store=deps.store,
            backend=deps.backend,
            cipher=deps.cipher,
            options=deps.options,
            clock=deps.clock,
            driver=driver,
            tasks=tasks,
            answers=answers,
        )
        #: The answers to clients without tasks (``without_tasks = "request"``); they open their
        #: requests through :attr:`creation`.
        self.without_tasks = WithoutTasksFlow(
            store=deps.store,
            tasks=deps.task_store,
            links=self.links,
            options=deps.options,
            creation=self.creation,
            answers=answers,
            backend=deps.backend,
            nudge=driver.nudge,
            output_schema=deps.tools.output_schema,
        )

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Start after the tasks runtime: reconcile crash leftovers, then drive approvals in the background."""
        await self.backend.start(self.driver.wake)
        await self.driver.start()
        self._running = True

    async def stop(self) -> None:
        """Stop driving approvals (work in progress is left for the next start or another worker)."""
        self._running = False
        await self.driver.stop()
        await self.backend.stop()

    async def wake(self, handle: str) -> None:
        """A backend callback or listener says ``handle`` may have changed (a wake-up, never a verdict)."""
        if self._running:
            await self.driver.wake(handle)

    # -- a requestable denial ----------------------------------------------------------------

    async def __call__(self, call: GatedCall, decision: Decision, ctx: ServerRequestContext[Any, Any]) -> HandlerResult:
        """Answer a requestable denial: a ``working`` task, or the degraded path without tasks."""
        if not declares_tasks(ctx):
            if self.options.without_tasks == "error":
                require_client_extension(ctx, TASKS_EXTENSION)  # raises -32021 naming the extension
            if self.options.without_tasks == "request":
                return await self._without_tasks(call, decision, ctx)
            return await self._degraded(call, decision, ctx)
        owner = self.tasks.caller(ctx)
        if not isinstance(owner, str):  # tasks bind to a principal; an anonymous caller gets none
            return await self._degraded(call, decision, ctx)
        requestable = await self._requestable(call, decision, owner, input_fields(self.options, decision))
        try:
            return await self.creation.approval_task(requestable, ctx)
        except StoreUnavailableError as exc:
            raise MCPError(**jsonrpc_error(exc, "Approval store")) from exc

    async def _without_tasks(
        self, call: GatedCall, decision: Decision, ctx: ServerRequestContext[Any, Any]
    ) -> HandlerResult:
        """A client without tasks: open (or join) a request; the identical retry takes its outcome once.

        A client that declared URL elicitation is sent to the requester page while the request is
        open (:mod:`~mcp_approval.approval.without_tasks.links`), by its revision's own mechanism.
        """
        owner = self.tasks.caller(ctx)
        fields = input_fields(self.options, decision)
        if not isinstance(owner, str) or (fields and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS):
            # No principal to own a request, or approvers need inputs and 2025-11-25 has no MRTR round.
            return await self._degraded(call, decision, ctx)
        requestable = await self._requestable(call, decision, owner, fields)
        try:
            return await self.without_tasks.answer_call(requestable, ctx)
        except StoreUnavailableError as exc:
            raise MCPError(**jsonrpc_error(exc, "Approval store")) from exc

    async def _requestable(
        self, call: GatedCall, decision: Decision, owner: str, fields: tuple[str, ...]
    ) -> RequestableCall:
        """``call`` as creation takes it: bound to its tool's current definition, owned by ``owner``."""
        binding = CallBinding(
            tool=call.tool,
            arguments=call.arguments,
            principal=call.principal,
            client=call.client,
            tool_fingerprint=await self.tools.fingerprint(call.tool),
        )
        return RequestableCall(call, decision, binding, owner, fields)

    async def request_status(self, reference: str, ctx: ServerRequestContext[Any, Any]) -> Any:
        """Where the caller's approval request ``reference`` stands (the ``approval_status`` tool).

        A reference that is unknown or belongs to another principal gets the same answer.
        """
        try:
            owner = self.tasks.caller(ctx)
            return await self.without_tasks.status(reference, owner if isinstance(owner, str) else None)
        except StoreUnavailableError as exc:
            raise MCPError(**jsonrpc_error(exc, "Approval store")) from exc

    async def input_received(self, record: Any) -> None:
        """``tasks/update`` answered an approval task's submission inputs: go on at once."""
        self.driver.nudge(record.task_id)

    # -- tasks/cancel ------------------------------------------------------------------------

    async def cancel_task(self, record: Any) -> None:
        """``tasks/cancel`` on an approval task: the fence races the claim; only a winner cancels."""
        await self.driver.cancel(record.task_id)
