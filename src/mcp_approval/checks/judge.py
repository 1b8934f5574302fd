"""How the kit reads an outcome: from the structure first, and the words only for contradictions.

What happened to a call is read from the task's ``status``, the result's ``isError``, the
disposition in its ``_meta`` and the SEP-2643 envelope, never from the wording. The body (the
text content, which a model reads) is then checked against that outcome with a generous rule:

- a body of an executed call must not say that the tool did not run ("did not run", "was not
  executed", "was never called", ...);
- a body of a denial must state the denial or that nothing ran (any negation, or a word such as
  denied, declined, rejected, refused, expired, withdrawn, cancelled), and must neither claim the
  action happened ("Transfer completed.") nor that it will still happen ("it will run");
- the text shown while a task is pending (``statusMessage``, the model-immediate response) must
  not claim the action happened unless it also says what is still awaited (a text that mentions
  another call that ran, next to "waiting for approval", passes).

A sentence claims the action happened when it has a word of completion (completed, succeeded,
executed, ran, performed, done, carried out, went through, transferred, paid, processed) and no
negation, condition or time-to-come (not, no, never, will, would, once, when, if, after, before,
until, unless, pending, awaiting, waiting, needs, requires, must, can, may, only). Anything
else passes: the rule fails a body only when its words contradict the outcome or say nothing of it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from mcp_approval.protocol import META_AUTHORIZATION, META_MODEL_IMMEDIATE_RESPONSE, META_TOOL_APPROVAL_DISPOSITION

__all__ = [
    "PENDING",
    "TERMINAL",
    "body_text",
    "claims_done",
    "denial_body_problem",
    "disposition",
    "envelope",
    "executed_body_problem",
    "member",
    "model_texts",
    "presents_as_done",
    "says_not_run",
]

PENDING = frozenset({"working", "input_required"})
TERMINAL = frozenset({"completed", "failed", "cancelled"})

_NEGATION = re.compile(r"\b(not|no|never|nothing|none|neither|nor|without|cannot)\b|n't\b", re.IGNORECASE)
_NOT_RUN = re.compile(
    r"(\bnot|n't|\bnever)\s+(yet\s+|been\s+|be\s+|have\s+been\s+|get\s+)?"
    r"(run|ran|execut\w*|perform\w*|carried\s+out|call(ed)?|invok\w*|start\w*|go\s+through|went\s+through)\b",
    re.IGNORECASE,
)
_DONE = re.compile(
    r"\b(completed|succeeded|successful(ly)?|executed|ran|performed|done|carried\s+out|went\s+through|"
    r"transferred|paid|processed)\b",
    re.IGNORECASE,
)
_NOT_YET = re.compile(
    r"\b(will|would|shall|once|when|if|after|before|until|unless|pending|awaiting|waiting|needs?|requires?|"
    r"required|must|can|could|may|might|only|to\s+be)\b",
    re.IGNORECASE,
)
_WILL_RUN = re.compile(
    r"\b(will|shall|is\s+going\s+to|are\s+going\s+to)\s+(still\s+|now\s+|then\s+)?(be\s+)?"
    r"(run|execut\w*|proceed|go\s+through|go\s+ahead|carried\s+out|sent|paid|processed|completed|made)\b",
    re.IGNORECASE,
)
_DENIED = re.compile(
    r"\b(denied|declined|rejected|refused|expired|withdrawn|cancell?ed|blocked|lapsed|not\s+approved)\b", re.IGNORECASE
)
_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+|\n+")


def _sentences(text: str) -> list[str]:
    return [part for part in _SENTENCE_END.split(text) if part.strip()]


def member(document: Mapping[str, Any], key: str) -> dict[str, Any]:
    """``document[key]`` when it is a JSON object, else an empty one (what a server sends is untrusted)."""
    value = document.get(key)
    return value if isinstance(value, dict) else {}


def body_text(result: Mapping[str, Any]) -> str:
    """The text content of a ``CallToolResult`` (what a tasks-only client's model reads)."""
    content = result.get("content")
    items = content if isinstance(content, list) else []
    return " ".join(str(item.get("text", "")) for item in items if isinstance(item, dict))


def disposition(result: Mapping[str, Any]) -> Any:
    """The tool-approval disposition in a result's ``_meta`` (``None`` when absent)."""
    meta = result.get("_meta")
    return meta.get(META_TOOL_APPROVAL_DISPOSITION) if isinstance(meta, dict) else None


def envelope(document: Mapping[str, Any]) -> Any:
    """The SEP-2643 envelope in a document's ``_meta`` (``None`` when absent)."""
    meta = document.get("_meta")
    return meta.get(META_AUTHORIZATION) if isinstance(meta, dict) else None


def model_texts(document: Mapping[str, Any]) -> list[str]:
    """The model-facing text of a task document: its ``statusMessage`` and model-immediate response."""
    meta = document.get("_meta")
    found = [document.get("statusMessage")]
    if isinstance(meta, dict):
        found.append(meta.get(META_MODEL_IMMEDIATE_RESPONSE))
    return [text for text in found if isinstance(text, str)]


def says_not_run(text: str) -> bool:
    """The text says the tool did not run (a negation right before a verb of running)."""
    return bool(_NOT_RUN.search(text))


def claims_done(text: str) -> str | None:
    """The first sentence that claims the action happened, unqualified (``None`` when none does)."""
    for sentence in _sentences(text):
        if _DONE.search(sentence) and not _NEGATION.search(sentence) and not _NOT_YET.search(sentence):
            return sentence.strip()
    return None


def presents_as_done(text: str) -> str | None:
    """The sentence by which a pending task's text claims the action happened, when nothing in the text
    says what is still awaited (``None`` otherwise)."""
    claim = claims_done(text)
    return None if claim is None or _NOT_YET.search(text) else claim


def executed_body_problem(text: str) -> str | None:
    """What is wrong with the body of an executed call, or ``None``."""
    if not text.strip():
        return "the body is empty: it does not state that the tool ran"
    if says_not_run(text):
        return f"the body says the tool did not run: {text[:160]!r}"
    return None


def denial_body_problem(text: str) -> str | None:
    """What is wrong with the body of a denial (nothing ran), or ``None``."""
    if (claim := claims_done(text)) is not None:
        return f"the denial's body claims the action happened: {claim[:160]!r}"
    if (later := _WILL_RUN.search(text)) is not None and not any(
        _NEGATION.search(s) for s in _sentences(text) if later.group(0) in s
    ):
        return f"the denial's body says the call will still run: {later.group(0)!r}"
    if not (_NEGATION.search(text) or _DENIED.search(text)):
        return f"the body does not state that the tool did not run (only _meta marks the denial): {text[:160]!r}"
    return None
