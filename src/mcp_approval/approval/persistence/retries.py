"""The approval store's part for clients without tasks: the identical retry takes its request's outcome, once."""

from __future__ import annotations

from sqlalchemy import Connection, update

from mcp_approval.approval.persistence import statements as sql
from mcp_approval.approval.persistence.core import StoreCore
from mcp_approval.approval.persistence.records import call_scope
from mcp_approval.approval.persistence.schema import approval_workflows_table

__all__ = ["RetryStore"]

_W = approval_workflows_table


class RetryStore(StoreCore):
    """The requests made without tasks, as their callers read them (with :class:`StoreCore`'s reads)."""

    async def take_retry_outcome(self, principal_digest: str, tool: str, digest: str) -> str | None:
        """Take the ended, not yet answered request made without tasks in this dedup scope.

        A compare-and-set on ``owed_to_retry``: of concurrent identical retries exactly one takes
        it (and answers its outcome); the approval is then spent. Returns its task id, or ``None``.
        """
        now, call = self.clock.now_ms(), call_scope(principal_digest, tool, digest)

        def take(conn: Connection) -> str | None:
            task_id = sql.owed_match(conn, call)
            if task_id is None:
                return None
            taken = update(_W).where(_W.c.task_id == task_id, _W.c.owed_to_retry == 1).values(owed_to_retry=None)
            if conn.execute(taken).rowcount != 1:
                return None
            self._event(conn, now, "approval.outcome_answered", task_id, digest, tool=tool)
            return task_id

        return await self.database.write(take)
