"""Durable state of the reference ARAP service (schema version 3), on SQLite or PostgreSQL.

Only what ARAP adds lives here: recorded evaluations (the shared-state binding), tasks (handle,
caller-scoped Idempotency-Key, binding, callback), issued approvals, and used ``jti`` values.
The callbacks owed (``arap_callbacks``) are :mod:`~mcp_approval.reference.ars_outbox`'s.
Each function is one transaction on a :class:`~mcp_approval.storage.Database`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, delete, select, update
from sqlalchemy.exc import IntegrityError

from mcp_approval.backends.local.schema import approval_requests_table
from mcp_approval.reference.ars_schema import (
    arap_approvals_table,
    arap_evaluations_table,
    arap_jti_table,
    arap_tasks_table,
)
from mcp_approval.storage.database import Database

__all__ = ["ArapStore", "ArsApprovalRecord", "ArsTaskRecord", "EvaluationRecord"]

_E, _T, _A, _J = arap_evaluations_table, arap_tasks_table, arap_approvals_table, arap_jti_table
_R = approval_requests_table


@dataclass(frozen=True)
class EvaluationRecord:
    """A requestable denial the PDP issued."""

    evaluation_id: str
    binding_hash: str
    members: list[str]
    template: str | None
    display: dict[str, Any] | None
    expires_at: int


@dataclass(frozen=True)
class ArsTaskRecord:
    """An Access Request task; its status lives in the local backend's ``approval_requests`` row."""

    task_id: str
    caller: str
    idempotency_key: str | None
    body_digest: str
    request_id: str
    binding_hash: str
    members: list[str]
    evaluation_id: str | None
    callback_endpoint: str | None
    callback_state: str | None
    created_at: int
    expires_at: int
    retain_until: int


@dataclass(frozen=True)
class ArsApprovalRecord:
    """An approval the ARS issued for an approved task."""

    approval_id: str
    task_id: str
    binding_hash: str
    members: list[str]
    approved_at: int
    approved_until: int
    state: str
    revoked_at: int | None


class ArapStore:
    """The four ARAP tables on one database."""

    def __init__(self, database: Database) -> None:
        self.database = database

    # -- evaluations ------------------------------------------------------------------------------

    async def record_evaluation(self, record: EvaluationRecord, now: int) -> None:
        """Remember a requestable denial (and drop those whose window closed)."""
        values = {
            "evaluation_id": record.evaluation_id,
            "binding_hash": record.binding_hash,
            "members_json": json.dumps(record.members),
            "template": record.template,
            "display_json": None if record.display is None else json.dumps(record.display),
            "expires_at": record.expires_at,
            "created_at": now,
        }

        def write(conn: Connection) -> None:
            conn.execute(delete(_E).where(_E.c.expires_at < now))
            conn.execute(_E.insert(), values)

        await self.database.write(write)

    async def evaluation(self, evaluation_id: str) -> EvaluationRecord | None:
        """A recorded denial, or ``None``."""
        query = select(_E).where(_E.c.evaluation_id == evaluation_id)
        row = await self.database.read(lambda conn: conn.execute(query).mappings().first())
        if row is None:
            return None
        display = json.loads(row["display_json"]) if row["display_json"] else None
        return EvaluationRecord(
            row["evaluation_id"], row["binding_hash"], json.loads(row["members_json"]), row["template"], display,
            row["expires_at"],
        )  # fmt: skip

    # -- tasks ------------------------------------------------------------------------------------

    async def task(self, task_id: str) -> ArsTaskRecord | None:
        """A task by id."""
        return await self._one_task(select(_T).where(_T.c.task_id == task_id))

    async def task_by_key(self, caller: str, key: str) -> ArsTaskRecord | None:
        """The task ``caller`` submitted under Idempotency-Key ``key``."""
        return await self._one_task(select(_T).where(_T.c.caller == caller, _T.c.idempotency_key == key))

    async def task_by_request(self, request_id: str) -> ArsTaskRecord | None:
        """The task carried by a local approval request."""
        return await self._one_task(select(_T).where(_T.c.request_id == request_id))

    async def jti_used(self, jti: str, now: int) -> bool:
        """Whether a ``binding_token`` with this ``jti`` already opened a task."""
        query = select(_J.c.jti).where(_J.c.jti == jti, _J.c.expires_at >= now)
        return await self.database.read(lambda conn: conn.execute(query).first() is not None)

    async def insert_task(self, task: ArsTaskRecord, jti: tuple[str, int] | None, now: int) -> None:
        """Insert the task and (atomically) mark its token's ``jti`` used.

        Raises:
            sqlalchemy.exc.IntegrityError: the key or the ``jti`` was taken concurrently.
        """

        # The request's row lock orders this insert against a transaction ending the request
        # (PostgreSQL; SQLite's BEGIN IMMEDIATE already does): either that transaction sees the
        # task and queues its callback, or it committed first and the submission answers the end.
        lock = select(_R.c.request_id).where(_R.c.request_id == task.request_id).with_for_update()

        def write(conn: Connection) -> None:
            conn.execute(lock)
            conn.execute(delete(_J).where(_J.c.expires_at < now))
            if jti is not None:
                conn.execute(_J.insert(), {"jti": jti[0], "expires_at": jti[1]})
            conn.execute(_T.insert(), _task_values(task))

        await self.database.write(write)

    async def _one_task(self, query: Any) -> ArsTaskRecord | None:
        row = await self.database.read(lambda conn: conn.execute(query).mappings().first())
        return None if row is None else _task(dict(row))

    # -- approvals --------------------------------------------------------------------------------

    async def approval_for_task(self, task_id: str) -> ArsApprovalRecord | None:
        """The approval issued for a task, if any."""
        return await self._one_approval(select(_A).where(_A.c.task_id == task_id))

    async def approval(self, approval_id: str) -> ArsApprovalRecord | None:
        """An issued approval by id."""
        return await self._one_approval(select(_A).where(_A.c.approval_id == approval_id))

    async def insert_approval(self, record: ArsApprovalRecord) -> ArsApprovalRecord:
        """Store ``record`` unless the task already has an approval; answer the one that is stored."""

        def write(conn: Connection) -> Mapping[str, Any]:
            existing = conn.execute(select(_A).where(_A.c.task_id == record.task_id)).mappings().first()
            if existing is not None:
                return dict(existing)
            values = {**record.__dict__, "members_json": json.dumps(record.members)}
            del values["members"]
            conn.execute(_A.insert(), values)
            return dict(conn.execute(select(_A).where(_A.c.task_id == record.task_id)).mappings().one())

        try:
            return _approval(await self.database.write(write))
        except IntegrityError:
            # A concurrent issue for the same task committed first: its approval is the one.
            stored = await self.approval_for_task(record.task_id)
            if stored is None:
                raise
            return stored

    async def revoke(self, approval_id: str, now: int) -> None:
        """Revoke an issued approval (re-evaluations then answer ``approval_expired``)."""
        statement = update(_A).where(_A.c.approval_id == approval_id, _A.c.revoked_at.is_(None)).values(revoked_at=now)
        await self.database.write(lambda conn: conn.execute(statement))

    # -- sweeping ---------------------------------------------------------------------------------

    async def purge(self, now: int) -> int:
        """Release the Idempotency-Keys of tasks past their retention, and drop spent ``jti`` values
        and closed denial windows; returns how many keys were released.

        The task row stays (its handle keeps answering ``task_expired``); only the key is freed,
        so the same key may name a new request after the window, as ARAP's idempotency allows.
        """
        release = (
            update(_T).where(_T.c.retain_until < now, _T.c.idempotency_key.is_not(None)).values(idempotency_key=None)
        )

        def write(conn: Connection) -> int:
            conn.execute(delete(_J).where(_J.c.expires_at < now))
            conn.execute(delete(_E).where(_E.c.expires_at < now))
            return int(conn.execute(release).rowcount)

        return await self.database.write(write)

    async def _one_approval(self, query: Any) -> ArsApprovalRecord | None:
        row = await self.database.read(lambda conn: conn.execute(query).mappings().first())
        return None if row is None else _approval(dict(row))


def _task_values(task: ArsTaskRecord) -> dict[str, Any]:
    values = dict(task.__dict__)
    values["members_json"] = json.dumps(values.pop("members"))
    return values


def _task(row: Mapping[str, Any]) -> ArsTaskRecord:
    values = {key: row[key] for key in row if key != "members_json"}
    return ArsTaskRecord(**values, members=_members(row["members_json"]))


def _approval(row: Mapping[str, Any]) -> ArsApprovalRecord:
    values = {key: row[key] for key in row if key != "members_json"}
    return ArsApprovalRecord(**values, members=_members(row["members_json"]))


def _members(text: str) -> list[str]:
    members: Sequence[str] = json.loads(text)
    return list(members)
