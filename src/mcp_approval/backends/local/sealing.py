"""The local backend's seal at work: what it seals as it writes, and what it checks as it reads.

What is sealed and why is :mod:`~mcp_approval.backends.local.seals`; rows stored before a
revision sealed them are sealed at start (:mod:`~mcp_approval.backends.local.seal_upgrade`).
Without a seal (a reviewer surface not given the server's binding keys) nothing is sealed or
checked, and a decision on a sealed request is refused: it would never count.
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
from mcp_approval.backends.local.rows import Row, decision_rows, fetch, state_of
from mcp_approval.backends.local.rules import ApprovalTemplate, RequestRules, rules_of
from mcp_approval.backends.local.seal_upgrade import seal_found_requests
from mcp_approval.backends.local.seals import RequestSeal, approval_granted, request_failure, sealed_content
from mcp_approval.storage.database import Database

__all__ = ["RequestSealing"]

_log = logging.getLogger(__name__)


class RequestSealing:
    """Seals a request's rows as they are written and checks them as they are read.

    Args:
        database: the database the requests are kept in.
        seal: the key; ``None``: nothing is sealed or checked.
    """

    def __init__(self, database: Database, seal: RequestSeal | None) -> None:
        self._db = database
        self._seal = seal

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
            _log.error("approval request %s… failed its integrity check: %s", row["request_id"][:8], failure)
            return ApprovalState(ApprovalStatus.FAILED, integrity_failure=failure)
        if row.get("rules_json") is None:  # stored before rules were sealed: as its columns say
            return state_of(row)
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

    async def seal_found(self, templates: Mapping[str, ApprovalTemplate]) -> None:
        """Seal what open requests stored before a revision sealed it lack (see :func:`seal_found_requests`);
        a row stored before rules were is sealed with its template's rules in ``templates``."""
        seal = self._seal
        if seal is None:
            return
        count = await self._db.write(lambda conn: seal_found_requests(conn, seal, lambda row: rules_of(row, templates)))
        if count:
            _log.info("sealed %d open approval requests stored before their rules and decisions were sealed", count)
