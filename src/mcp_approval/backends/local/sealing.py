"""The local backend's seal at work: what it seals as it writes, and what it checks as it reads.

What is sealed and why is :mod:`~mcp_approval.backends.local.seals`. A start seals nothing: it
reports the open requests that lack a seal (an ERROR line, an ``approval.unverified`` audit event
each, which ``mcp_approval_integrity_failures`` counts); rows stored before a revision sealed them
are sealed by the operator, once (:mod:`~mcp_approval.backends.local.seal_upgrade`). Without a
seal (a reviewer surface not given the server's binding keys) nothing is sealed or checked, and a
decision on a sealed request is refused: it would never count.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence

from sqlalchemy import Connection

from mcp_approval.backends.contract import (
    ApprovalState,
    ApprovalStatus,
    ApprovalSubmission,
    RequestIntegrityError,
    SealedRequest,
    UnknownRequestError,
)
from mcp_approval.backends.local.errors import ReviewError
from mcp_approval.backends.local.rows import Row, decision_rows, event_data, fetch, state_of
from mcp_approval.backends.local.rules import ApprovalTemplate, RequestRules
from mcp_approval.backends.local.seal_manifest import SealManifest, recorded_manifest
from mcp_approval.backends.local.seal_upgrade import seal_requests_in, unsealed_requests
from mcp_approval.backends.local.seals import RequestSeal, approval_granted, request_failure, sealed_content
from mcp_approval.clock import Clock
from mcp_approval.safe_text import terminal_text
from mcp_approval.storage.audit import AuditLog
from mcp_approval.storage.database import Database

__all__ = ["RequestSealing"]

_log = logging.getLogger(__name__)


def _one_line(text: str) -> str:
    # Stored text in a log line (any handler, a library server's too): escaped, kept to the line.
    return terminal_text(text).replace("\n", "\\n").replace("\t", "\\t")


class RequestSealing:
    """Seals a request's rows as they are written and checks them as they are read.

    Args:
        database: the database the requests are kept in.
        seal: the key; ``None``: nothing is sealed or checked.
        audit: where the unsealed requests a start finds, and the operator's sealing, are recorded.
        clock: the source of time.
    """

    def __init__(self, database: Database, seal: RequestSeal | None, audit: AuditLog, clock: Clock) -> None:
        self._db = database
        self._seal = seal
        self._audit = audit
        self._clock = clock

    @property
    def seal(self) -> RequestSeal | None:
        """The key, or ``None``."""
        return self._seal

    def content_seal(self, values: Row) -> str | None:
        """The seal of a request row about to be stored (it names its ``request_id``), or ``None``."""
        if self._seal is None:
            return None
        return self._seal.seal(sealed_content(values), record=values["request_id"])

    def failure(self, row: Row, decisions: Sequence[Row]) -> str | None:
        """Why the request's rows cannot be trusted as this backend wrote them, or ``None`` (or without a seal)."""
        return None if self._seal is None else request_failure(self._seal, row, decisions)

    def check_decidable(self, row: Row) -> None:
        """Refuse to record a decision on a sealed request without the key.

        Raises:
            ReviewError: the request is sealed and this backend holds no seal.
        """
        if self._seal is None and row.get("content_seal") is not None:
            # A decision written without the key would never count: say so instead of storing it.
            raise ReviewError(
                f"request {row['request_id'][:8]}… is sealed under the server's binding key, which was not given "
                "here, so a decision recorded here would not count: give the server's binding keys, or "
                "decide through the server's reviewer API"
            )

    async def approved_state(self, row: Row) -> ApprovalState:
        """An approved request's state, from its sealed decisions under its sealed rules.

        The status column alone is never trusted: rows that do not match their seals, or decisions
        that do not approve the request under its rules, make it ``failed`` with the reason.
        """
        if self._seal is None:
            return state_of(row)
        decisions = await self._db.read(lambda conn: decision_rows(conn, [row["request_id"]]))
        failure = request_failure(self._seal, row, decisions)
        if failure is not None:
            shown = _one_line(row["request_id"][:8])
            _log.error("approval request %s… failed its integrity check: %s", shown, _one_line(failure))
            return ApprovalState(ApprovalStatus.FAILED, integrity_failure=failure)
        grant = approval_granted(RequestRules.from_text(row["rules_json"]), row["requester"], decisions)
        assert grant is not None  # request_failure checked that the decisions approve it
        return state_of({**row, "decided_at": grant.approved_at, "approved_until": grant.approved_until})

    async def sealed_request(self, handle: str) -> SealedRequest | None:
        """What the request was submitted as, checked against its seals (``None`` without a seal).

        Raises:
            RequestIntegrityError: the request's rows do not match their seals.
            UnknownRequestError: no such request.
        """
        seal = self._seal
        if seal is None:
            return None

        def read(conn: Connection) -> tuple[Row | None, list[Row]]:
            row = fetch(conn, handle)
            return row, decision_rows(conn, [handle]) if row is not None else []

        row, decisions = await self._db.read(read)
        if row is None:
            raise UnknownRequestError(f"no approval request {handle[:8]}…")
        failure = request_failure(seal, row, decisions)
        if failure is not None:
            raise RequestIntegrityError(failure)
        body = ApprovalSubmission.from_json(json.loads(row["body_json"]))
        return SealedRequest(
            key=row["idempotency_key"],
            tool=row["tool_name"],
            requester=row["requester"],
            call_digest=body.call_digest(),
        )

    async def approval_failure(self, handle: str) -> str | None:
        """Why the request is not approved by its sealed decisions under its sealed rules, or ``None``."""

        def read(conn: Connection) -> tuple[Row | None, list[Row]]:
            row = fetch(conn, handle)
            return row, decision_rows(conn, [handle]) if row is not None else []

        row, decisions = await self._db.read(read)
        if row is None:
            return "no such approval request is stored"
        if not any(decision["decision"] == "approve" for decision in decisions):
            return "no reviewer's approval of it is stored"
        seal = self._seal
        if seal is None:
            return None
        failure = request_failure(seal, row, decisions)
        if failure is not None:
            return failure
        if approval_granted(RequestRules.from_text(row["rules_json"]), row["requester"], decisions) is None:
            return "its sealed decisions do not approve it under its sealed rules"
        return None

    async def report_unsealed(self) -> int:
        """Report the open requests that lack a seal; how many (none without a seal).

        Nothing is sealed or changed: each is an integrity failure until the operator seals it
        (requests of an earlier release) or denies it. One ERROR line says how many and what to do,
        and each gets an ``approval.unverified`` audit event (once per reason, across restarts).
        """
        seal = self._seal
        if seal is None:
            return 0

        def read(conn: Connection) -> list[tuple[Row, list[Row]]]:
            rows = unsealed_requests(conn, ("pending", "approved"))
            return [(row, decision_rows(conn, [row["request_id"]])) for row in rows]

        found = await self._db.read(read)
        for row, decisions in found:
            why = request_failure(seal, row, decisions)
            if why is not None and not await self._reported(row["request_id"], why):
                data = {"why": why, **event_data(row)}
                await self._audit.record("approval.unverified", subject=row["request_id"], actor="start", data=data)
        rows = [row for row, _ in found]
        if rows:
            shown = ", ".join(_one_line(row["request_id"][:12]) + "…" for row in rows[:5])
            _log.error(
                "open approval requests without their seals: %d (%s%s). Nobody may approve them and nothing "
                "runs on them. Requests stored by an earlier release are sealed by the operator, once: "
                "mcp-approval upgrade seal-requests (see the deployment guide, upgrading); any other was "
                "written to the database without the binding key",
                len(rows),
                shown,
                ", …" if len(rows) > 5 else "",
            )
        return len(rows)

    async def _reported(self, request_id: str, why: str) -> bool:
        events = await self._audit.events(subject=request_id)
        return any(event.kind == "approval.unverified" and event.data.get("why") == why for event in events)

    async def seal_requests(
        self, templates: Mapping[str, ApprovalTemplate], *, actor: str, dry_run: bool = False
    ) -> SealManifest:
        """The operator's one-time step (:func:`~.seal_upgrade.seal_requests_in`) in one write transaction.

        Raises:
            ReviewError: this backend holds no seal.
            SealStepDoneError: the step already ran on this database.
        """
        seal = self._require_seal()
        now = self._clock.now_ms()

        def run(conn: Connection) -> SealManifest:
            return seal_requests_in(conn, seal, templates, self._audit, now=now, actor=actor, dry_run=dry_run)

        if dry_run:
            return await self._db.read(run)
        manifest = await self._db.write(run)
        sealed, left = len(manifest.sealed), len(manifest.left)
        _log.info(
            "%s sealed %d approval requests stored before sealing, as found; left %d", _one_line(actor), sealed, left
        )
        return manifest

    async def manifest(self) -> SealManifest | None:
        """The record of the one-time step, checked against its seal, or ``None`` when it never ran.

        Raises:
            ReviewError: this backend holds no seal.
            SealStepDoneError: a record is stored but does not authenticate.
        """
        seal = self._require_seal()
        return await self._db.read(lambda conn: recorded_manifest(conn, seal))

    def _require_seal(self) -> RequestSeal:
        if self._seal is None:
            raise ReviewError(
                "sealing needs the server's binding keys (give the deployment file, or --binding-key-file)"
            )
        return self._seal
