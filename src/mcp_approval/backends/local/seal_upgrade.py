"""Sealing requests stored before a revision sealed them, when a sealing backend starts.

Revision local_0002 added the content seal, local_0005 the sealed rules and decisions. A request
still open across such an upgrade (pending, or approved and not yet run) lacks them; the backend
seals what it lacks at start, trusting the rows as it finds them then, so the request still
completes. A row whose older seal no longer matches its content is left as it is: flagged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from sqlalchemy import Connection, or_, select, update

from mcp_approval.backends.local.rows import Row, decision_rows
from mcp_approval.backends.local.rules import RequestRules
from mcp_approval.backends.local.schema import approval_decisions_table, approval_requests_table
from mcp_approval.backends.local.seals import RequestSeal, request_failure, seal_decision, sealed_content

__all__ = ["seal_found_requests"]

_R = approval_requests_table
_D = approval_decisions_table


def seal_found_requests(conn: Connection, seal: RequestSeal, rules_of: Callable[[Row], RequestRules | None]) -> int:
    """Seal the open requests that lack a content seal or their rules, with their decisions; how many.

    ``rules_of`` gives a row's rules as configured now (``None``: its template is gone).
    """
    unsealed = select(_R).where(
        _R.c.status.in_(("pending", "approved")), or_(_R.c.content_seal.is_(None), _R.c.rules_json.is_(None))
    )
    rows = [dict(row) for row in conn.execute(unsealed.with_for_update()).mappings()]
    return sum(_seal_found(conn, seal, row, rules_of(row)) for row in rows)


def _seal_found(conn: Connection, seal: RequestSeal, row: Row, rules: RequestRules | None) -> bool:
    """Seal one request stored before sealing, with its decisions; whether anything was sealed."""
    if row["content_seal"] is not None and request_failure(seal, row, ()) is not None:
        return False
    if rules is None and row["content_seal"] is not None:
        return False  # its template is gone: nobody may decide it, and its content is sealed already
    values: dict[str, Any] = {}
    if rules is not None:
        # The row's own approvals_required was sealed with it: what it was submitted under.
        rules = replace(rules, approvals_required=row["approvals_required"])
        values = {"rules_json": rules.to_text(), "reviewer_role": rules.reviewer_role}
    values["content_seal"] = seal.seal(sealed_content({**row, **values}), record=row["request_id"])
    conn.execute(update(_R).where(_R.c.request_id == row["request_id"]).values(**values))
    for decision in decision_rows(conn, [row["request_id"]]):
        if decision["seal"] is None:
            same = _D.c.request_id == decision["request_id"], _D.c.reviewer == decision["reviewer"]
            conn.execute(update(_D).where(*same).values(seal=seal_decision(seal, decision)))
    return True
