"""The sealed manifest of the one-time sealing of requests stored before sealing.

The operator's step (:mod:`~mcp_approval.backends.local.seal_upgrade`) trusts what it finds:
every request it seals, and every request it leaves as it is, is named here with what it was
sealed with (status, rules, the decisions found). The manifest is stored in
``approval_seal_manifests`` (revision local_0006), one row per step, and sealed under the binding
key like the rows it names: a database writer can delete it but cannot write or edit one that
opens. Its primary key makes the step one-time: a second run finds it and refuses.

Why a table of its own rather than the audit chain: the chain is hashed, not keyed (whoever writes
the database can rewrite its tail), and the step must find its own record in one indexed read, in
the transaction that seals, to refuse a second run. Each request sealed also gets an
``approval.sealed_as_found`` event in the chain, so its audit trail says so.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, select

from mcp_approval.backends.local.errors import ReviewError
from mcp_approval.backends.local.schema import approval_seal_manifests_table
from mcp_approval.backends.local.seals import RequestSeal
from mcp_approval.clock import iso8601

__all__ = [
    "SEAL_REQUESTS",
    "LeftUnsealed",
    "SealManifest",
    "SealStepDoneError",
    "SealedAsFound",
    "record_manifest",
    "recorded_manifest",
]

_M = approval_seal_manifests_table

#: The step that seals requests stored before their content, rules and decisions were sealed.
SEAL_REQUESTS = "seal-requests"


class SealStepDoneError(ReviewError):
    """The one-time step already ran on this database (or its record does not authenticate)."""


@dataclass(frozen=True)
class SealedAsFound:
    """A request the step sealed as it found it: its rules and the decisions it took as recorded.

    Attributes:
        request_id: the request.
        status: its status when it was sealed.
        tool: the tool it asks for.
        requester: who asked.
        template: its policy template (``None``: the default one).
        rules: the rules it was sealed with (``RequestRules.to_text()``).
        decisions: ``(reviewer, "approve" | "deny")`` of each decision found, now sealed.
    """

    request_id: str
    status: str
    tool: str
    requester: str
    template: str | None
    rules: str
    decisions: tuple[tuple[str, str], ...]

    def to_json(self) -> dict[str, Any]:
        """The entry as a JSON object."""
        return {
            "request_id": self.request_id,
            "status": self.status,
            "tool": self.tool,
            "requester": self.requester,
            "template": self.template,
            "rules": self.rules,
            "decisions": [list(decision) for decision in self.decisions],
        }


@dataclass(frozen=True)
class LeftUnsealed:
    """A request the step found without its seals and left as it is (it stays an integrity failure)."""

    request_id: str
    status: str
    why: str

    def to_json(self) -> dict[str, Any]:
        """The entry as a JSON object."""
        return {"request_id": self.request_id, "status": self.status, "why": self.why}


@dataclass(frozen=True)
class SealManifest:
    """What one run of a step sealed as found, and what it left.

    Attributes:
        step: the step (:data:`SEAL_REQUESTS`).
        sealed_at: when it ran (epoch milliseconds).
        actor: who ran it.
        sealed: the requests it sealed.
        left: the requests it found without their seals and left unsealed, with why.
    """

    step: str
    sealed_at: int
    actor: str
    sealed: tuple[SealedAsFound, ...]
    left: tuple[LeftUnsealed, ...]

    def to_json(self) -> dict[str, Any]:
        """The manifest as a JSON object (``sealed_at`` as ISO 8601)."""
        return {
            "step": self.step,
            "sealed_at": iso8601(self.sealed_at),
            "actor": self.actor,
            "sealed": [entry.to_json() for entry in self.sealed],
            "left": [entry.to_json() for entry in self.left],
        }

    def _document(self) -> dict[str, Any]:
        return {**self.to_json(), "sealed_at": self.sealed_at}

    @classmethod
    def _from_document(cls, document: Mapping[str, Any]) -> SealManifest:
        return cls(
            step=document["step"],
            sealed_at=int(document["sealed_at"]),
            actor=document["actor"],
            sealed=tuple(
                SealedAsFound(
                    request_id=entry["request_id"],
                    status=entry["status"],
                    tool=entry["tool"],
                    requester=entry["requester"],
                    template=entry["template"],
                    rules=entry["rules"],
                    decisions=tuple((str(reviewer), str(verdict)) for reviewer, verdict in entry["decisions"]),
                )
                for entry in document["sealed"]
            ),
            left=tuple(LeftUnsealed(e["request_id"], e["status"], e["why"]) for e in document["left"]),
        )


def _record(step: str) -> str:
    # Sealed to its step: a manifest copied to another step's row does not open.
    return f"seal-manifest|{step}"


def record_manifest(conn: Connection, seal: RequestSeal, manifest: SealManifest) -> None:
    """Store ``manifest``, sealed, in the caller's transaction (a second one for its step violates the key)."""
    document = manifest._document()
    conn.execute(
        _M.insert(),
        {
            "step": manifest.step,
            "sealed_at": manifest.sealed_at,
            "actor": manifest.actor,
            "manifest_json": json.dumps(document, sort_keys=True, separators=(",", ":")),
            "seal": seal.seal(document, record=_record(manifest.step)),
        },
    )


def recorded_manifest(conn: Connection, seal: RequestSeal, step: str = SEAL_REQUESTS) -> SealManifest | None:
    """The manifest stored for ``step``, checked against its seal, or ``None`` when the step never ran.

    Raises:
        SealStepDoneError: a manifest is stored for ``step`` but does not open under ``seal`` or
            does not match its seal (written without the key, or under keys since dropped).
    """
    row = conn.execute(select(_M).where(_M.c.step == step)).mappings().first()
    if row is None:
        return None
    try:
        sealed = seal.open(row["seal"], record=_record(step))
    except Exception:  # any failure to authenticate is the same verdict
        sealed = None
    if sealed is None or sealed != json.loads(row["manifest_json"]):
        raise SealStepDoneError(
            f"a record of the step {step!r} is stored, but it does not authenticate under these binding keys: "
            "the step does not run again over it; see docs/deployment.md (upgrading) before removing it"
        )
    return SealManifest._from_document(sealed)
