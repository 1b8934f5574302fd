"""A call the policy denied requestably, as the approval service hands it on: learned once, carried down."""

from __future__ import annotations

from dataclasses import dataclass

from mcp_approval.approval.binding import CallBinding
from mcp_approval.approval.gate import GatedCall
from mcp_approval.approval.options import ApprovalOptions
from mcp_approval.policy import Decision

__all__ = ["RequestableCall", "input_fields", "template_of"]


@dataclass(frozen=True)
class RequestableCall:
    """One requestable denial on its way to an approval request.

    The service builds it once; creation and the answers to clients without tasks read from it
    and never map, size or fingerprint the call again.

    Attributes:
        gated: the call as the gate evaluated it: its arguments, the policy request the PDP
            denied, whether the arguments are large, the MRTR round it answers.
        decision: the requestable denial.
        binding: what an approval of the call is bound to (sealed with its task).
        owner: the task owner's digest, as the tasks extension computes it for the caller.
        fields: the submission inputs the denial's template asks of the requester (none: the
            request is submitted at once).
    """

    gated: GatedCall
    decision: Decision
    binding: CallBinding
    owner: str
    fields: tuple[str, ...] = ()

    @property
    def tool(self) -> str:
        """The tool the call names."""
        return self.binding.tool

    @property
    def template(self) -> str | None:
        """The access request template the denial names (who approves, and which inputs they need)."""
        return template_of(self.decision)


def template_of(decision: Decision) -> str | None:
    """The access request template a requestable denial names (its submission inputs are keyed by it)."""
    denial = decision.requestable_denial
    return denial.access_request.template if denial is not None else None


def input_fields(options: ApprovalOptions, decision: Decision) -> tuple[str, ...]:
    """The submission inputs ``options`` ask of a requester for ``decision``'s template."""
    template = template_of(decision)
    return options.submission_inputs.get(template, ()) if template else ()
