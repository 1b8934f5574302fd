"""SQLite group commit: concurrent writes share a transaction, yet each stands or falls alone."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import Column, Connection, Integer, MetaData, String, Table, select
from sqlalchemy.exc import IntegrityError

from mcp_approval.storage import open_database

pytestmark = pytest.mark.anyio

rows = Table("rows", MetaData(), Column("id", Integer, primary_key=True), Column("label", String(16)))


async def test_a_failing_write_rolls_back_alone_among_concurrent_ones(tmp_path: Path) -> None:
    db = open_database(f"sqlite:///{tmp_path / 'g.db'}")
    try:
        await db.write(lambda conn: rows.create(conn))

        def insert(n: int, label: str) -> object:
            def run(conn: Connection) -> int:
                conn.execute(rows.insert().values(id=n, label=label))
                if label == "boom":
                    raise ValueError(f"operation {n} fails after writing")
                return n

            return run

        operations = [insert(n, "boom" if n % 7 == 3 else "ok") for n in range(200)]
        operations.append(insert(0, "duplicate"))  # violates the primary key of operation 0
        outcomes = await asyncio.gather(*(db.write(op) for op in operations), return_exceptions=True)  # type: ignore[arg-type]
        stored = await db.read(lambda conn: {row.id: row.label for row in conn.execute(select(rows))})
    finally:
        await db.close()
    for n in range(200):
        if n % 7 == 3:
            assert isinstance(outcomes[n], ValueError)
            assert n not in stored  # its own insert was rolled back
        else:
            assert outcomes[n] == n
            assert stored[n] == "ok"
    assert isinstance(outcomes[200], IntegrityError)
