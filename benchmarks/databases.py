"""Databases for the benchmarks: a scratch PostgreSQL database per run, fresh stores per measurement."""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from dataclasses import dataclass
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy.engine import make_url

#: Where the benchmarks create their scratch database (overridable with --postgres-url).
DEFAULT_POSTGRES_URL = os.environ.get("MCP_APPROVAL_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


#: Tables past autovacuum's thresholds, computed as autovacuum does (PostgreSQL 13 and later).
AUTOVACUUM_DUE = """
SELECT s.relname,
       s.n_dead_tup > current_setting('autovacuum_vacuum_threshold')::float
                      + current_setting('autovacuum_vacuum_scale_factor')::float * greatest(c.reltuples, 0)
       OR s.n_ins_since_vacuum > current_setting('autovacuum_vacuum_insert_threshold')::float
                      + current_setting('autovacuum_vacuum_insert_scale_factor')::float * greatest(c.reltuples, 0)
         AS vacuum,
       s.n_mod_since_analyze > current_setting('autovacuum_analyze_threshold')::float
                      + current_setting('autovacuum_analyze_scale_factor')::float * greatest(c.reltuples, 0)
         AS analyze
FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
ORDER BY s.relname
"""


@dataclass
class Postgres:
    """A scratch database created for this run and dropped at its end."""

    admin_dsn: str
    name: str
    url: str  # postgresql://... of the scratch database

    @classmethod
    async def create(cls, admin_url: str) -> Postgres:
        """Create ``mcpa_bench_<random>`` on the server ``admin_url`` points at."""
        parsed = make_url(admin_url).set(drivername="postgresql")
        admin_dsn = parsed.render_as_string(hide_password=False)
        name = f"mcpa_bench_{secrets.token_hex(4)}"
        conn = await asyncpg.connect(admin_dsn, timeout=5)
        try:
            await conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            await conn.close()
        return cls(admin_dsn, name, parsed.set(database=name).render_as_string(hide_password=False))

    @classmethod
    async def create_or_explain(cls, admin_url: str) -> Postgres | None:
        """:meth:`create`, or ``None`` after telling on stderr why the server cannot be used."""
        try:
            return await cls.create(admin_url)
        except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
            print(
                f"error: PostgreSQL not reachable at {make_url(admin_url)!s} ({type(exc).__name__}: {exc}); "
                "pass --postgres-url URL or --no-postgres",
                file=sys.stderr,
            )
            return None

    async def reset(self) -> None:
        """Drop the project's tables, so the next store starts from an empty schema."""
        conn = await asyncpg.connect(self.url, timeout=5)
        try:
            await conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public;")
        finally:
            await conn.close()

    async def table_bytes(self, table: str = "tasks") -> int:
        """The on-disk size of ``table`` with its indexes."""
        conn = await asyncpg.connect(self.url, timeout=5)
        try:
            return int(await conn.fetchval("SELECT pg_total_relation_size($1)", table))
        finally:
            await conn.close()

    async def vacuum_due(self) -> list[str]:
        """Vacuum and analyze the tables autovacuum would pick now; returns what was done.

        The bench's own stand-in for autovacuum (off on some servers, and on its own one-minute
        schedule otherwise): each table whose dead rows, rows inserted since the last vacuum, or rows
        changed since the last analyze pass the server's autovacuum thresholds (base plus scale factor
        times the table's estimated rows, as autovacuum computes them) gets ``VACUUM`` and/or ``ANALYZE``.
        """
        conn = await asyncpg.connect(self.url, timeout=5)
        try:
            rows = await conn.fetch(AUTOVACUUM_DUE)
            done: list[str] = []
            for row in rows:
                work = [name for name, due in (("VACUUM", row["vacuum"]), ("ANALYZE", row["analyze"])) if due]
                if work:
                    statement = "VACUUM (ANALYZE)" if len(work) == 2 else work[0]
                    await conn.execute(f'{statement} "{row["relname"]}"')
                    done.append(f"{statement} {row['relname']}")
            return done
        finally:
            await conn.close()

    async def drop(self) -> None:
        """Drop the scratch database (closing what still uses it)."""
        conn = await asyncpg.connect(self.admin_dsn, timeout=5)
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        finally:
            await conn.close()


@dataclass
class DatabaseKind:
    """One database kind under test: a fresh, empty database per :meth:`fresh` call."""

    label: str
    workdir: Path
    postgres: Postgres | None = None
    prefix: str = "bench"
    _count: int = 0

    async def fresh(self) -> str:
        """A URL of an empty database of this kind."""
        self._count += 1
        if self.postgres is None:
            return f"sqlite:///{self.workdir / f'{self.prefix}-{self._count}.db'}"
        await self.postgres.reset()
        return self.postgres.url

    def sqlite_bytes(self, url: str) -> tuple[int, int]:
        """(main file, WAL file) sizes of a SQLite database URL."""
        path = Path(make_url(url).database or "")
        wal = path.with_name(path.name + "-wal")
        return path.stat().st_size, wal.stat().st_size if wal.exists() else 0


def database_kinds(workdir: Path, postgres: Postgres | None, *, prefix: str) -> list[DatabaseKind]:
    """SQLite always, PostgreSQL when a scratch database exists."""
    kinds = [DatabaseKind("SQLite", workdir, prefix=prefix)]
    if postgres is not None:
        kinds.append(DatabaseKind("PostgreSQL", workdir, postgres, prefix=prefix))
    return kinds


def add_postgres_arguments(parser: argparse.ArgumentParser) -> None:
    """``--postgres-url`` and ``--no-postgres``, as every benchmark with PostgreSQL figures takes them."""
    parser.add_argument(
        "--postgres-url",
        default=DEFAULT_POSTGRES_URL,
        help="an existing PostgreSQL database to connect to; a scratch database is created beside it "
        "and dropped at the end (default: %(default)s)",
    )
    parser.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL figures")
