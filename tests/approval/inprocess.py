"""The treasury deployment in this process, over ASGI, with a scriptable re-evaluation.

``ScriptedPDP`` is a real PDP (it delegates to the deployment's Cedar policy) whose answers to
*re-evaluations* (requests carrying ``context.approval``) can be scripted, so tests reach the
retry / request / deny outcomes of SEP-2848 §Completion that a static policy file cannot.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from mcp_approval.approval.engine.dependencies import PrincipalCheck
from mcp_approval.backends import ApprovalBackend
from mcp_approval.checks.wire import Wire
from mcp_approval.clock import Clock
from mcp_approval.config import load_config
from mcp_approval.policy import Decision, EvaluationRequest, EvaluationsSemantic, PolicyDecisionPoint
from mcp_approval.server.arap_backend import pdp_from_config
from mcp_approval.server.deployment import Deployment, build_deployment, deployment_app
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, deployment_dir, principals

BASE_URL = "http://127.0.0.1:8000"


#: A scripted answer: a decision, or a coroutine function given the approval that decides (a slow PDP).
ScriptedAnswer = Decision | Callable[[dict[str, Any]], Awaitable[Decision]]


class ScriptedPDP:
    """The Cedar decision, except that re-evaluations take the next scripted decision first."""

    def __init__(self, inner: PolicyDecisionPoint) -> None:
        self.inner = inner
        self.reevaluations: deque[ScriptedAnswer] = deque()
        self.seen_approvals: list[dict[str, Any]] = []
        self.gated: dict[str, str] = {}

    def script(self, *decisions: ScriptedAnswer) -> None:
        """Answer the next re-evaluations with ``decisions``, in order."""
        self.reevaluations.extend(decisions)

    def gate(self, tool: str, template: str = "treasury") -> None:
        """Make ``tool`` need approval: a requestable denial first, a permit once approved."""
        self.gated[tool] = template

    async def evaluate(self, request: EvaluationRequest) -> Decision:
        approval = (request.context or {}).get("approval")
        if approval is not None:
            self.seen_approvals.append(dict(approval))
            if self.reevaluations:
                answer = self.reevaluations.popleft()
                return answer if isinstance(answer, Decision) else await answer(dict(approval))
        template = self.gated.get(request.resource.id)
        if template is not None:
            if approval is not None:
                return Decision.permit()
            hint = {"expires_at": "2100-01-01T00:00:00Z", "template": template}
            return Decision.deny("approval_required", access_request=hint)
        return await self.inner.evaluate(request)

    async def evaluate_many(
        self, requests: Sequence[EvaluationRequest], semantic: EvaluationsSemantic = EvaluationsSemantic.EXECUTE_ALL
    ) -> list[Decision]:
        return [await self.evaluate(request) for request in requests]


@dataclass
class Harness:
    """A running in-process deployment and a client for it."""

    deployment: Deployment
    http: httpx.AsyncClient
    directory: Path
    pdp: ScriptedPDP

    @property
    def alice(self) -> Wire:
        return principals(self.http)["alice"]

    def reviewer(self, name: str) -> Reviewer:
        return Reviewer(self.http, f"{name}-token")

    def ledger(self) -> list[dict[str, Any]]:
        import json

        path = self.directory / "ledger.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _with_patient_reconciliation(overrides: dict[str, dict[str, Any]] | None) -> dict[str, dict[str, Any]]:
    """``overrides`` with a 30 s intent grace unless they name one.

    Nothing crashes in this process, so reconciliation has nothing to settle; the subprocess tests'
    1 s grace would let it take a submission that is merely slow on a loaded machine for one a
    crash left behind, and abandon it under the call that is still submitting.
    """
    merged = {section: dict(values) for section, values in (overrides or {}).items()}
    merged.setdefault("approval", {}).setdefault("intent_grace_s", 30.0)
    return merged


@asynccontextmanager
async def inprocess_treasury(
    tmp_path: Path,
    overrides: dict[str, dict[str, Any]] | None = None,
    *,
    clock: Clock | None = None,
    backend: ApprovalBackend | None = None,
    principal_valid: PrincipalCheck | None = None,
) -> AsyncIterator[Harness]:
    """Serve a private copy of the treasury example in this process (optionally on another backend).

    ``principal_valid`` replaces the deployment's check of whether a requester may still act.
    """
    directory = deployment_dir(tmp_path, _with_patient_reconciliation(overrides))
    config = load_config(directory / "config.toml")
    pdp = ScriptedPDP(pdp_from_config(config, clock=clock))
    deployment = build_deployment(
        config, base_url=BASE_URL, clock=clock, pdp=pdp, backend=backend, principal_valid=principal_valid
    )
    app = deployment_app(deployment)
    transport = httpx.ASGITransport(app=app)
    async with (
        deployment.server.session_manager.run(),
        httpx.AsyncClient(transport=transport, base_url=BASE_URL, timeout=scaled(20)) as http,
    ):
        yield Harness(deployment, http, directory, pdp)
