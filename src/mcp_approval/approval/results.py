"""The results of completed approval tasks: disposition, body text and envelope always agree.

SEP-2848 §Completion: every completed approval task carries
``io.modelcontextprotocol/tool-approval-disposition`` in its result's ``_meta``; the body states in
words whether the tool ran; the SEP-2643 envelope appears only on a denial (it asserts the
operation was not performed), never on an execution error or an unknown outcome.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from typing import Any

import mcp_types as types

from mcp_approval.approval.persistence.states import Disposition
from mcp_approval.denials import Remediation, final_denial
from mcp_approval.protocol import META_TOOL_APPROVAL_DISPOSITION, STRUCTURED_TOOL_APPROVAL
from mcp_approval.tasks.models import result_document

__all__ = ["DISPOSITION_TEXT", "denied_result", "executed_result", "outcome_unknown_result", "sanitize_model_text"]

#: The sentence each disposition puts in the body, so a tasks-only client's model reads it.
DISPOSITION_TEXT: dict[Disposition, str] = {
    Disposition.APPROVED_EXECUTED: "The call was approved and the tool ran once.",
    Disposition.DENIED_NOT_EXECUTED: "The tool did not run, so nothing changed.",
    Disposition.EXECUTION_ERROR: "The call was approved and the tool ran but reported an error; "
    "a side effect may have occurred.",
    Disposition.OUTCOME_UNKNOWN: "The call was approved and the tool may have run, but its outcome is unknown. "
    "Do not retry it automatically; check its effect first.",
}

_MAX_MODEL_TEXT = 300


def sanitize_model_text(text: str, *, limit: int = _MAX_MODEL_TEXT) -> str:
    """Text safe to show a model: no control or format characters, one line, bounded length.

    ``statusMessage`` and ``model-immediate-response`` are a prompt-injection surface (SEP-2848
    §Model-facing text is untrusted); nothing from a backend or a caller reaches them unfiltered.
    """
    kept = "".join(" " if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") else ch for ch in text)
    single = " ".join(kept.split())
    return single if len(single) <= limit else single[: limit - 1].rstrip() + "…"


def denied_result(tool: str, why: str) -> dict[str, Any]:
    """A terminal denial: ``isError``, envelope ``unavailable``, disposition ``denied-not-executed``."""
    text = f"{sanitize_model_text(why)} {DISPOSITION_TEXT[Disposition.DENIED_NOT_EXECUTED]} (tool: {tool})"
    result = final_denial(text, remediation=Remediation.UNAVAILABLE)
    return _with_disposition(result_document(result), Disposition.DENIED_NOT_EXECUTED)


def executed_result(
    result: types.CallToolResult, output_schema: Mapping[str, Any] | None = None
) -> tuple[dict[str, Any], Disposition]:
    """The tool's own result after an approved execution, stamped and stated.

    The statement goes into ``content`` and, when the tool returned ``structuredContent``, into it
    too (under :data:`~mcp_approval.protocol.STRUCTURED_TOOL_APPROVAL`): some clients show a model
    only ``structuredContent``. It is left out there when the tool's ``output_schema`` forbids
    further properties (a client validates the result against it) or already uses that key.
    """
    disposition = Disposition.EXECUTION_ERROR if result.is_error else Disposition.APPROVED_EXECUTED
    text = DISPOSITION_TEXT[disposition]
    update: dict[str, Any] = {"content": [*result.content, types.TextContent(type="text", text=text)]}
    structured = result.structured_content
    if isinstance(structured, dict) and STRUCTURED_TOOL_APPROVAL not in structured and _takes_more(output_schema):
        stated = {"disposition": disposition.value, "text": text}
        update["structured_content"] = {**structured, STRUCTURED_TOOL_APPROVAL: stated}
    return _with_disposition(result_document(result.model_copy(update=update)), disposition), disposition


def _takes_more(output_schema: Mapping[str, Any] | None) -> bool:
    """Whether an object valid under ``output_schema`` may carry one more property."""
    if output_schema is None:
        return True
    return output_schema.get("additionalProperties", True) is True and "unevaluatedProperties" not in output_schema


def outcome_unknown_result() -> dict[str, Any]:
    """The result of a claimed execution whose outcome cannot be confirmed (never re-invoked)."""
    text = DISPOSITION_TEXT[Disposition.OUTCOME_UNKNOWN]
    result = types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)
    return _with_disposition(result_document(result), Disposition.OUTCOME_UNKNOWN)


def _with_disposition(document: dict[str, Any], disposition: Disposition) -> dict[str, Any]:
    meta = dict(document.get("_meta") or {})
    meta[META_TOOL_APPROVAL_DISPOSITION] = disposition.value
    document["_meta"] = meta
    return document
