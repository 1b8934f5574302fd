"""Sealing requests stored before a revision sealed them: the operator's one-time step.

Revision local_0002 added the content seal, local_0005 the sealed rules and decisions. A request
stored before them lacks them, and a request without its seals is an integrity failure: nobody may
approve it and nothing runs on it. No server start changes that (a start that sealed what it
found would seal a row a database writer had just unsealed and forged). The operator does, once,
after the last worker of the earlier release stopped: ``mcp-approval upgrade seal-requests``
calls :func:`seal_requests_in`, which seals each such request as found, with its template's rules
and its decisions, and records what it sealed and what it left in a sealed manifest
(:mod:`~mcp_approval.backends.local.seal_manifest`). A second run refuses.

What it trusts is what it finds then: a row edited before the step is sealed as edited. It seals
only what an earlier release can have left: requests without stored rules (this release stores
them, and seals them with the request and every decision), with no content seal or one that still
matches. It leaves as they are, named in the manifest, and still integrity failures: a request
carrying rules but missing a seal, one whose earlier seal no longer matches it, a decision whose
seal does not open, a request whose template is gone, and an approved request its decisions do not
approve under the rules it would be sealed with.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import Connection, exists, or_, select, update

from mcp_approval.backends.local.rows import Row, decision_rows
from mcp_approval.backends.local.rules import ApprovalTemplate, rules_of
from mcp_approval.backends.local.schema import approval_decisions_table, approval_requests_table
from mcp_approval.backends.local.seal_manifest import (
    SEAL_REQUESTS,
    LeftUnsealed,
    SealedAsFound,
    SealManifest,
    SealStepDoneError,
    record_manifest,
    recorded_manifest,
)
from mcp_approval.backends.local.seals import (
    NO_SEALED_RULES,
    RequestSeal,
    content_failure,
    decision_failure,
    request_failure,
    seal_decision,
    sealed_content,
)
from mcp_approval.clock import iso8601
from mcp_approval.storage.audit import AuditLog

__all__ = ["seal_requests_in", "unsealed_requests"]

_R = approval_requests_table
_D = approval_decisions_table


def unsealed_requests(conn: Connection, statuses: Sequence[str] | None = None, *, lock: bool = False) -> list[Row]:
    """The requests (of ``statuses``, or all) lacking a content seal or sealed rules, or with an unsealed decision."""
    # Correlated, so a start's look at the open requests reads their decisions by key, not the whole table.
    unsealed_decision = exists().where(_D.c.request_id == _R.c.request_id, _D.c.seal.is_(None))
    where = or_(_R.c.content_seal.is_(None), _R.c.rules_json.is_(None), unsealed_decision)
    if statuses is not None:
        where = where & _R.c.status.in_(list(statuses))
    query = select(_R).where(where).order_by(_R.c.created_at, _R.c.request_id)
    return [dict(row) for row in conn.execute(query.with_for_update() if lock else query).mappings()]


def seal_requests_in(
    conn: Connection,
    seal: RequestSeal,
    templates: Mapping[str, ApprovalTemplate],
    audit: AuditLog,
    *,
    now: int,
    actor: str,
    dry_run: bool = False,
) -> SealManifest:
    """Seal every request stored before sealing as found, and record the manifest; the manifest.

    Runs in the caller's write transaction. ``templates`` give the rules of requests stored before
    rules were; ``dry_run`` finds and checks the same requests and writes nothing.

    Raises:
        SealStepDoneError: the step already ran on this database.
    """
    done = recorded_manifest(conn, seal)
    if done is not None:
        raise SealStepDoneError(
            f"the requests stored before sealing were sealed once already, at {iso8601(done.sealed_at)} by "
            f"{done.actor} ({len(done.sealed)} sealed, {len(done.left)} left): the step runs once"
        )
    sealed: list[SealedAsFound] = []
    left: list[LeftUnsealed] = []
    for row in unsealed_requests(conn, lock=not dry_run):
        decisions = decision_rows(conn, [row["request_id"]])
        found = _sealed_as_found(seal, row, decisions, templates)
        if isinstance(found, str):
            left.append(LeftUnsealed(row["request_id"], row["status"], found))
            continue
        values, entry = found
        sealed.append(entry)
        if not dry_run:
            _write(conn, seal, row, values, decisions)
            data = {"step": SEAL_REQUESTS, "rules": entry.rules, "decisions": len(entry.decisions)}
            audit.record_in(conn, now, "approval.sealed_as_found", subject=row["request_id"], actor=actor, data=data)
    manifest = SealManifest(SEAL_REQUESTS, now, actor, tuple(sealed), tuple(left))
    if not dry_run:
        record_manifest(conn, seal, manifest)
    return manifest


def _sealed_as_found(
    seal: RequestSeal, row: Row, decisions: Sequence[Row], templates: Mapping[str, ApprovalTemplate]
) -> tuple[dict[str, Any], SealedAsFound] | str:
    """The columns that seal ``row`` as found and its manifest entry, or why it is left as it is."""
    if row["rules_json"] is not None:
        # Only this release stores rules, and it seals them with the request and each decision.
        return "it carries rules, which no earlier release stored: its missing seals were not left by one"
    vouched = row["content_seal"] is not None
    if vouched and content_failure(seal, row) != NO_SEALED_RULES:
        return "its earlier seal does not match it: it was edited after it was sealed"
    for decision in decisions:
        if decision["seal"] is not None and decision_failure(seal, decision) is not None:
            return f"the decision of {decision['reviewer']} carries a seal that does not authenticate"
    rules = rules_of(row, templates)
    if rules is None:
        return f"its template {row['template']!r} is not configured, so there are no rules to seal it with"
    # The earlier seal covered the row's approvals_required (what it was submitted under); a row
    # without one is not cut below what its template asks.
    required = row["approvals_required"] if vouched else max(row["approvals_required"], rules.approvals_required)
    rules = replace(rules, approvals_required=required)
    values: dict[str, Any] = {
        "rules_json": rules.to_text(),
        "reviewer_role": rules.reviewer_role,
        "approvals_required": required,
    }
    values["content_seal"] = seal.seal(sealed_content({**row, **values}), record=row["request_id"])
    resealed = [{**d, "seal": d["seal"] or seal_decision(seal, d)} for d in decisions]
    failure = request_failure(seal, {**row, **values}, resealed)
    if failure is not None:
        return failure
    entry = SealedAsFound(
        request_id=row["request_id"],
        status=row["status"],
        tool=row["tool_name"],
        requester=row["requester"],
        template=row["template"],
        rules=rules.to_text(),
        decisions=tuple((d["reviewer"], d["decision"]) for d in decisions),
    )
    return values, entry


def _write(conn: Connection, seal: RequestSeal, row: Row, values: Mapping[str, Any], decisions: Sequence[Row]) -> None:
    conn.execute(update(_R).where(_R.c.request_id == row["request_id"]).values(**values))
    for decision in decisions:
        if decision["seal"] is None:
            same = _D.c.request_id == decision["request_id"], _D.c.reviewer == decision["reviewer"]
            conn.execute(update(_D).where(*same).values(seal=seal_decision(seal, decision)))
