"""Step-up: a second factor a template's decisions need beyond the reviewer's sign-in.

A template with ``step_up = "passkey"`` stores that rule with each request (sealed, in its
:class:`~mcp_approval.backends.local.rules.RequestRules`), and :meth:`LocalApprovalBackend.decide
<mcp_approval.backends.LocalApprovalBackend.decide>` refuses every decision on such a request that
does not carry a :class:`StepUp`: the reviewer API's plain ``decide``, ``mcp-approval review``,
Slack and any other channel that cannot verify a passkey are refused with
:class:`StepUpRequiredError`, which tells the reviewer to decide in the console.

The backend does not verify the passkey itself (the reviewer surface does, with the ``webauthn``
package); it checks, in the decision's own transaction, that the verified assertion was bound to
this request as it stands (its :func:`sealed_digest`) and to this decision, and writes the step-up
into the decision's audit event.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp_approval.backends.local.errors import NotEligibleError
from mcp_approval.backends.local.seals import sealed_content

__all__ = ["PASSKEY", "StepUp", "StepUpRequiredError", "check_step_up", "sealed_digest"]

#: The one step-up method there is.
PASSKEY = "passkey"


class StepUpRequiredError(NotEligibleError):
    """The request's template needs a step-up the decision did not carry (or carried for another
    request or decision)."""


@dataclass(frozen=True)
class StepUp:
    """A verified second factor for one decision.

    Attributes:
        method: ``"passkey"``.
        credential_id: the passkey's credential id (base64url), as registered by the reviewer.
        sealed_digest: the :func:`sealed_digest` of the request the assertion was bound to.
        decision: the decision the assertion was bound to (``approve`` or ``deny``).
    """

    method: str
    credential_id: str
    sealed_digest: str
    decision: str

    def to_json(self) -> dict[str, str]:
        """What the decision's audit event records of it."""
        return {"method": self.method, "credential_id": self.credential_id, "sealed_digest": self.sealed_digest}


def sealed_digest(row: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of what a request's seal covers (call, requester,
    template, rules, deadline): it changes whenever anything a reviewer decides on changes."""
    text = json.dumps(sealed_content(row), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def check_step_up(row: Mapping[str, Any], required: str | None, decision: str, step_up: StepUp | None) -> None:
    """Refuse a decision on ``row`` whose rules require ``required`` without a matching step-up.

    Raises:
        StepUpRequiredError: no step-up, another method, or one bound to another request or decision.
    """
    if required is None:
        return
    if step_up is None or step_up.method != required:
        raise StepUpRequiredError(
            f"template {row['template'] or '(default)'!r} requires a {required} for every decision: "
            "decide it with your passkey in the console"
        )
    if step_up.decision != decision:
        raise StepUpRequiredError(f"the {required} confirmed {step_up.decision}, not {decision}")
    if step_up.sealed_digest != sealed_digest(row):
        raise StepUpRequiredError(f"the {required} confirmed another request, or this one as it was before")
