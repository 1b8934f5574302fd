"""Deciding several requests at once, each on its own: the reviewer API's ``POST /approvals/decide``
and the console's "Approve selected" / "Deny selected" both go through :func:`decide_each`.

A batch is not a transaction: each request is decided through the backend's ``decide`` as if it
were the only one (eligibility, self-approval, N-of-M, step-up), and one refusal stops nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from mcp_approval.backends import NotEligibleError, ReviewError, SupportsReview
from mcp_approval.backends.contract import UnknownRequestError
from mcp_approval.safe_text import storable

__all__ = ["BatchResult", "decide_each"]


@dataclass(frozen=True)
class BatchResult:
    """What happened to one request of a batch.

    Attributes:
        id: the request id as given.
        ok: whether the decision was recorded.
        status: the request's status after it (``None`` when refused).
        code: the HTTP status the refusal corresponds to (200 when recorded).
        error: why it was refused, or ``None``.
    """

    id: str
    ok: bool
    status: str | None
    code: int
    error: str | None

    def to_json(self) -> dict[str, Any]:
        """The result as the reviewer API answers it."""
        return {"id": self.id, "ok": self.ok, "status": self.status, "code": self.code, "error": self.error}


async def decide_each(
    backend: SupportsReview,
    request_ids: Sequence[str],
    reviewer: str,
    decision: Literal["approve", "deny"],
    comment: str | None,
) -> list[BatchResult]:
    """Decide each request on its own, in order; one result per id."""
    return [await _decided(backend, request_id, reviewer, decision, comment) for request_id in request_ids]


async def _decided(
    backend: SupportsReview, request_id: str, reviewer: str, decision: Literal["approve", "deny"], comment: str | None
) -> BatchResult:
    if not storable(request_id):
        return BatchResult(request_id, False, None, 404, "no such approval request")
    try:
        record = await backend.decide(request_id, reviewer, decision, comment)
    except UnknownRequestError:
        return BatchResult(request_id, False, None, 404, "no such approval request")
    except NotEligibleError as exc:
        return BatchResult(request_id, False, None, 403, str(exc))
    except ReviewError as exc:  # already decided, expired, or changing under the decision
        return BatchResult(request_id, False, None, 409, str(exc))
    return BatchResult(request_id, True, record.status.value, 200, None)
