"""Counts the database keeps, so a limit check reads a few rows however many rows it counts.

A layer that limits how many of its rows are in some set (unfinished tasks, a principal's
pending approvals) installs triggers, in one of its migration revisions, that append a ``+1`` or
``-1`` row to a counts table whenever a row enters or leaves the set, whatever statement moved
it. A *scope* names one count (``"tasks"``, ``"tasks:<principal digest>"``); its value is the
sum of its rows. Appending never updates a shared row, so concurrent writers on PostgreSQL never
wait for a counter; folding replaces a scope's rows with one row holding their sum, now and then,
so a read stays short.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Index,
    Integer,
    MetaData,
    Row,
    String,
    Table,
    bindparam,
    delete,
    func,
    select,
    text,
)

from mcp_approval.storage.database import Database

__all__ = ["FOLD_AT", "RECLAIM_AT", "ScopedCounts", "counts_table"]

#: A scope spread over more rows than this is folded by the read that finds it so.
FOLD_AT = 32
#: A counts table with this many dead rows is vacuumed by :meth:`ScopedCounts.reclaim` (PostgreSQL).
RECLAIM_AT = 5000
_DEAD_ROWS = text("SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = :name")


def counts_table(name: str, metadata: MetaData) -> Table:
    """The table of ``name`` (``id``, ``scope``, ``delta``) with its index on ``(scope, delta)``.

    Its rows are written by triggers only: the revision that creates the table spells out its
    own DDL and triggers; this describes the head revision for queries.
    """
    table = Table(
        name,
        metadata,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("scope", String(100), nullable=False),
        Column("delta", BigInteger, nullable=False),
    )
    Index(f"ix_{name}_scope", table.c.scope, table.c.delta)
    return table


class ScopedCounts:
    """Reading and folding the counts of one counts table; the statements are built once."""

    def __init__(self, table: Table) -> None:
        """Use ``table``, as built by :func:`counts_table`."""
        self._table = table
        totals = select(table.c.scope, func.sum(table.c.delta).label("total"), func.count().label("rows"))
        self._named = totals.where(table.c.scope.in_(bindparam("scopes", expanding=True))).group_by(table.c.scope)
        self._ranged = totals.where(table.c.scope >= bindparam("low"), table.c.scope <= bindparam("high")).group_by(
            table.c.scope
        )
        # One statement takes a scope's rows, however many: rows another transaction is folding
        # are skipped (PostgreSQL), so two folds never wait for each other and each moves only
        # the rows it holds; SQLite's writer is alone anyway.
        held = select(table.c.id).where(table.c.scope == bindparam("scope")).with_for_update(skip_locked=True)
        self._take_scope = delete(table).where(table.c.id.in_(held)).returning(table.c.delta)
        self._unfolded = select(table.c.scope).group_by(table.c.scope).having(func.count() > 1)

    @property
    def table(self) -> Table:
        """The counts table."""
        return self._table

    def read(self, conn: Connection, scopes: Iterable[str]) -> dict[str, int]:
        """The counts of ``scopes`` (a scope without rows is absent: 0), folding long ones."""
        return self._totals(conn, conn.execute(self._named, {"scopes": list(scopes)}))

    def read_range(self, conn: Connection, low: str, high: str) -> dict[str, int]:
        """The counts of the scopes from ``low`` to ``high`` inclusive, folding long ones."""
        return self._totals(conn, conn.execute(self._ranged, {"low": low, "high": high}))

    def fold_scope(self, conn: Connection, scope: str) -> None:
        """Replace the rows of ``scope`` with one row holding their sum (none when it is 0).

        Rows appended meanwhile by other transactions stay for the next fold: nothing is lost.
        """
        total = sum(int(delta) for delta in conn.execute(self._take_scope, {"scope": scope}).scalars())
        if total:
            conn.execute(self._table.insert(), {"scope": scope, "delta": total})

    def fold_all(self, conn: Connection) -> None:
        """Fold every scope spread over more than one row (also those nobody reads any more)."""
        for scope in conn.execute(self._unfolded).scalars().all():
            self.fold_scope(conn, scope)

    async def reclaim(self, database: Database) -> None:
        """Reclaim the rows folds deleted, once there are many (PostgreSQL ``VACUUM``; SQLite: nothing).

        Every count row is deleted by a fold sooner or later. Where autovacuum is off (or slow),
        a scope's index range would fill with dead rows that every read still walks; where it
        runs, the dead rows never reach :data:`RECLAIM_AT` and this only reads a statistic.
        """
        if database.dialect != "postgresql":
            return
        name = self._table.name
        dead = await database.read(lambda conn: conn.execute(_DEAD_ROWS, {"name": name}).scalar())
        if dead is not None and dead >= RECLAIM_AT:
            # Another worker vacuuming the same table holds its lock: skip, rather than wait for
            # it and then vacuum a table it just cleaned.
            await database.read(lambda conn: conn.exec_driver_sql(f"VACUUM (SKIP_LOCKED) {name}"))

    def _totals(self, conn: Connection, rows: Iterable[Row[Any]]) -> dict[str, int]:
        counts: dict[str, int] = {}
        for row in list(rows):  # read them all before a fold writes
            counts[row.scope] = int(row.total)
            if row.rows > FOLD_AT:
                self.fold_scope(conn, row.scope)
        return counts
