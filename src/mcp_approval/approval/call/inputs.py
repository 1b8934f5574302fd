"""Submission input collected before the task (SEP-2848 §Collecting submission input).

When an approval template needs fields the requester must supply (a justification, a ticket
reference), the first ``tools/call`` answers ``input_required`` with a form elicitation and a
``requestState`` naming the call it belongs to. The retry carries the answers and that state;
the state must match the retried call's tool, arguments and caller (the SDK verifies its seal
and its binding to the request; this module checks the call binding once more), and only then
is the request submitted and the task created.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from mcp_approval.approval.binding import CallBinding
from mcp_approval.approval.messages import INPUTS_DECLINED, INPUTS_UNSUPPORTED
from mcp_approval.denials import Remediation, final_denial
from mcp_approval.protocol import INVALID_PARAMS
from mcp_approval.tasks.capabilities import check_declared

__all__ = [
    "INPUT_KEY",
    "MISMATCH_MESSAGE",
    "Declined",
    "answered",
    "ask",
    "collect",
    "in_task_requests",
    "input_request",
    "supplied",
]

#: The input request key of the submission form.
INPUT_KEY = "approval_inputs"
_STATE_KIND = "mcp-approval/submission-inputs/v1"
MISMATCH_MESSAGE = "requestState does not belong to this call (tool, arguments or caller differ)"
_MAX_FIELD_CHARS = 2000


@dataclass(frozen=True)
class Declined:
    """The requester declined or cancelled the submission form."""

    action: str


def input_request(tool: str, fields: Sequence[str]) -> types.ElicitRequest:
    """The form asking for ``fields`` (strings, all required)."""
    schema = {
        "type": "object",
        "properties": {name: {"type": "string", "maxLength": _MAX_FIELD_CHARS} for name in fields},
        "required": list(fields),
    }
    message = f"Calling {tool} needs approval. Provide {', '.join(fields)} for the approvers."
    return types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=schema))


def in_task_requests(tool: str, fields: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The input requests of a task that asks for ``fields`` itself (answered via ``tasks/update``)."""
    return {"in-1": input_request(tool, fields).model_dump(by_alias=True, mode="json", exclude_none=True)}


def ask(binding: CallBinding, owner: str, fields: Sequence[str]) -> types.InputRequiredResult:
    """The ``input_required`` round asking for ``fields``, bound to this call."""
    state = json.dumps({"kind": _STATE_KIND, "tool": binding.tool, "digest": binding.digest, "owner": owner})
    return types.InputRequiredResult(
        input_requests={INPUT_KEY: input_request(binding.tool, fields)}, request_state=state
    )


def collect(
    binding: CallBinding,
    owner: str,
    fields: Sequence[str],
    responses: Mapping[str, Any] | None,
    request_state: str | None,
    capabilities: types.ClientCapabilities | None,
) -> dict[str, str] | types.CallToolResult | types.InputRequiredResult:
    """The inputs this call's MRTR retry supplies, else the form round asking for them.

    A requester that declined the form, or a client that declared no form elicitation
    (``capabilities``), is told that nothing was submitted (``undisclosed``).

    Raises:
        MCPError: ``-32602`` when the retry's ``requestState`` was minted for another call.
    """
    supplied = answered(binding, owner, fields, responses, request_state)
    if isinstance(supplied, Declined):
        message = INPUTS_DECLINED.format(tool=binding.tool, fields=", ".join(fields))
        return final_denial(message, remediation=Remediation.UNDISCLOSED)
    if supplied is not None:
        return dict(supplied)
    form = input_request(binding.tool, fields)
    try:
        check_declared({"method": form.method, "params": form.params.model_dump(by_alias=True)}, capabilities)
    except MCPError:
        message = INPUTS_UNSUPPORTED.format(tool=binding.tool, fields=", ".join(fields))
        return final_denial(message, remediation=Remediation.UNDISCLOSED)
    return ask(binding, owner, fields)


def answered(
    binding: CallBinding,
    owner: str,
    fields: Sequence[str],
    responses: Mapping[str, Any] | None,
    request_state: str | None,
) -> dict[str, str] | Declined | None:
    """The supplied fields, :class:`Declined`, or ``None`` when this is not (yet) an answer.

    Raises:
        MCPError: ``-32602`` when the retry's ``requestState`` was minted for another call.
    """
    if request_state is None:
        return None
    _check_state(request_state, binding, owner)
    answer = (responses or {}).get(INPUT_KEY)
    return None if answer is None else supplied(answer, fields)


def supplied(answer: Any, fields: Sequence[str]) -> dict[str, str] | Declined | None:
    """The fields an elicitation answer supplies, :class:`Declined`, or ``None`` when incomplete."""
    action = _member(answer, "action")
    if action != "accept":
        return Declined(str(action or "cancel"))
    content = _member(answer, "content") or {}
    supplied = {name: content.get(name) for name in fields} if isinstance(content, Mapping) else {}
    if not all(isinstance(value, str) and value.strip() for value in supplied.values()) or len(supplied) != len(fields):
        return None  # incomplete: ask again
    return {name: str(value)[:_MAX_FIELD_CHARS] for name, value in supplied.items()}


def _check_state(request_state: str, binding: CallBinding, owner: str) -> None:
    try:
        state = json.loads(request_state)
    except ValueError:
        state = None
    expected = {"kind": _STATE_KIND, "tool": binding.tool, "digest": binding.digest, "owner": owner}
    if state != expected:
        raise MCPError(code=INVALID_PARAMS, message=MISMATCH_MESSAGE)


def _member(value: Any, name: str) -> Any:
    if isinstance(value, Mapping):
        return value.get(name)
    return getattr(value, name, None)
