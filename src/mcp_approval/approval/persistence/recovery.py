"""The approval store's part for recovery: creations in flight, orphans a crash left, records past retention."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, delete, exists, select, update

from mcp_approval.approval.persistence import statements as sql
from mcp_approval.approval.persistence.core import StoreCore
from mcp_approval.approval.persistence.records import Intent, intent_from_row
from mcp_approval.approval.persistence.schema import approval_intents_table, approval_workflows_table
from mcp_approval.approval.persistence.states import IntentState

__all__ = ["RecoveryStore"]

_W = approval_workflows_table
_I = approval_intents_table


class RecoveryStore(StoreCore):
    """Vouches for creations in flight, settles the intents a crash left, purges what outlived its task."""

    async def renew_intents(self, keys: Sequence[str]) -> None:
        """Mark the in-flight intents ``keys`` as still being created (their writer is alive)."""
        in_flight = sorted(state.value for state in (IntentState.OPEN, IntentState.SUBMITTED))
        statement = (
            update(_I)
            .where(_I.c.idempotency_key.in_(list(keys)), _I.c.state.in_(in_flight))
            .values(updated_at=self.clock.now_ms())
        )

        def renew(conn: Connection) -> None:
            conn.execute(statement)

        await self.database.write(renew)

    async def claim_orphan(self, intent: Intent) -> bool:
        """Claim an in-flight intent for withdrawal; ``False`` if it moved on (e.g. its task was created).

        A compare-and-set on the intent: a task creation binds only a ``submitted`` intent, so of the
        two, exactly one wins.
        """
        return await self._move_intent(intent.key, IntentState.WITHDRAWING)

    async def stale_intents(self, older_than_ms: int, limit: int = 500) -> list[Intent]:
        """Unsettled intents (in flight, or being withdrawn) last moved or renewed before ``older_than_ms``."""
        statement = select(_I).where(_I.c.state.in_(sql.UNSETTLED), _I.c.updated_at < older_than_ms).limit(limit)
        return await self.database.read(lambda conn: [intent_from_row(row._mapping) for row in conn.execute(statement)])

    async def purge_orphans(self, after: str = "", limit: int = 1000) -> str | None:
        """Delete workflows and settled intents whose task row is gone (retention ended), one page at a time.

        The page is the next ``limit`` workflows by task id after ``after`` (and the intents of the
        same task id range), so a call reads a bounded number of rows however many are pending.
        Returns where the next page starts, or ``None`` once the last page was purged.

        Also tidies the admission counts: drops the per-minute intent counts of minutes long past
        and folds the rest, so the rows of principals that no longer ask do not pile up.
        """
        page = select(_W.c.task_id).where(_W.c.task_id > after).order_by(_W.c.task_id).limit(limit)
        now = self.clock.now_ms()

        def purge(conn: Connection) -> str | None:
            ids = list(conn.execute(page).scalars())
            upto = ids[-1] if len(ids) == limit else None
            in_range = [_W.c.task_id > after] + ([_W.c.task_id <= upto] if upto is not None else [])
            conn.execute(delete(_W).where(*in_range, ~self.tasks.exists(_W.c.task_id)))
            intents_in_range = [_I.c.task_id > after] + ([_I.c.task_id <= upto] if upto is not None else [])
            settled = _I.c.state.not_in(sql.UNSETTLED)
            conn.execute(delete(_I).where(*intents_in_range, settled, ~exists().where(_W.c.task_id == _I.c.task_id)))
            sql.fold_counts(conn, now)
            return upto

        upto = await self.database.write(purge)
        await sql.APPROVAL_COUNTS.reclaim(self.database)
        return upto
