"""Versioned schema migrations: each layer's tables are one Alembic history, applied programmatically.

Every layer that keeps rows owns its tables and their history (:class:`Migrations`): the tasks
layer (``tasks``), the approval layer (``approval_workflows``, ``approval_intents``), the local
approval backend (``approval_requests``, ``approval_decisions``), the audit log (``audit_events``)
and the reference Access Request Service (``arap_*``). A history is a folder of Alembic revision
files shipped inside the package, next to the module that declares the tables; each revision
spells out its DDL (``op.create_table`` with every column), so a column added later never
changes an earlier step. Each history records its position in its own version table
(``alembic_version_<name>``): histories are independent, and a database holds the tables of the
components that were opened on it and nothing else.

:func:`migrate` brings the histories it is given to their heads in one write transaction that
holds a database-wide lock (an advisory lock on PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite), so
several workers starting together apply each step exactly once. No ``alembic.ini`` or ``env.py``
is involved: the runner configures Alembic's migration context on the transaction's connection.

Databases created before the histories existed carry a ``schema_version`` table (versions 1 to
3). A history with no version table yet on such a database is first stamped at the revision that
release version corresponds to (:attr:`Migrations.legacy`), then upgraded; ``schema_version`` is
kept, read-only, so a history opened later on the same database is recognised the same way.

Logging: one INFO line when a call changes the schema (which histories moved, from what to what),
DEBUG otherwise. Alembic's own step-by-step INFO lines are shown only when the
``mcp_approval.storage`` logger is enabled for DEBUG, unless the application set the ``alembic``
logger's level itself.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, inspect, text

from mcp_approval.errors import MCPApprovalError
from mcp_approval.storage.database import Database

if TYPE_CHECKING:
    from alembic.runtime.migration import MigrationContext, RevisionStep
    from alembic.script import ScriptDirectory

__all__ = ["LEGACY_VERSION_TABLE", "Migrations", "SchemaTooNewError", "migrate"]

#: The single version table of the releases before per-layer histories (versions 1 to 3).
LEGACY_VERSION_TABLE = "schema_version"
#: The newest version that table ever held.
_LAST_LEGACY_VERSION = 3

logger = logging.getLogger("mcp_approval.storage")
_ALEMBIC_LOGGER = "alembic"

# An arbitrary constant naming this project's migration lock on PostgreSQL (the releases before
# per-layer histories took the same one, so an old and a new worker never migrate at once).
_PG_MIGRATION_LOCK = 0x6D6370_61707072


class SchemaTooNewError(MCPApprovalError, RuntimeError):
    """The database was migrated by a newer mcp-approval than this one (a downgrade is never applied)."""


@dataclass(frozen=True)
class Migrations:
    """One layer's tables as a versioned history of Alembic revisions.

    Attributes:
        name: the history's name; its version table is ``alembic_version_<name>``.
        location: the folder of revision files (shipped inside the package).
        legacy: for databases made before per-layer histories: ``(release version, revision)``
            pairs, ascending; a database whose ``schema_version`` reached that release version
            already has this history's tables as of that revision. Empty when no release
            created them.
    """

    name: str
    location: Path
    legacy: tuple[tuple[int, str], ...] = ()

    @property
    def version_table(self) -> str:
        """Where this history's current revision is recorded."""
        return f"alembic_version_{self.name}"

    def legacy_revision(self, release_version: int) -> str | None:
        """The revision a database at ``release_version`` of the old single history is at."""
        found: str | None = None
        for since, revision in self.legacy:
            if release_version >= since:
                found = revision
        return found

    def script(self) -> ScriptDirectory:
        """The revision files (read once per process)."""
        return _script_directory(self.location)

    def revisions(self) -> frozenset[str]:
        """Every revision this code ships for the history."""
        return frozenset(script.revision for script in self.script().walk_revisions())

    def head(self) -> str | None:
        """The history's head revision, read from its files without Alembic (``None``: not one head)."""
        return _linear_head(self.location)


#: ``revision = "..."`` and ``down_revision... = "..."`` in a revision file.
_REVISION = re.compile(r'^revision\s*=\s*"([^"]+)"', re.MULTILINE)
_DOWN_REVISION = re.compile(r'^down_revision[^=]*=\s*"([^"]+)"', re.MULTILINE)


@functools.cache
def _linear_head(location: Path) -> str | None:
    """The one revision no other revision file revises (a history with branches has no single one)."""
    revisions: set[str] = set()
    revised: set[str] = set()
    for path in location.glob("*.py"):
        source = path.read_text(encoding="utf-8")
        revision, down = _REVISION.search(source), _DOWN_REVISION.search(source)
        if revision is not None:
            revisions.add(revision.group(1))
        if down is not None:
            revised.add(down.group(1))
    heads = revisions - revised
    return next(iter(heads)) if len(heads) == 1 else None


@functools.cache
def _script_directory(location: Path) -> ScriptDirectory:
    # Alembic is imported when a database is first migrated, not with the package.
    from alembic.script import ScriptDirectory

    return ScriptDirectory(str(location), version_locations=[str(location)])


async def migrate(database: Database, *histories: Migrations) -> dict[str, tuple[str, ...]]:
    """Bring each of ``histories`` to its head; return the revisions each was at before.

    Raises:
        SchemaTooNewError: a history is at a revision this code does not know (a newer release
            migrated the database); nothing is changed.
        TypeError: no history was given.
    """
    if not histories:
        raise TypeError("migrate() needs the histories of the tables to create (e.g. TASKS_MIGRATIONS)")
    _alembic_details_at_debug()
    moves = await database.write(lambda conn: _apply(conn, histories))
    _log_moves(moves)
    return {name: before for name, (before, _after) in moves.items()}


_Moves = dict[str, tuple[tuple[str, ...], tuple[str, ...]]]


def _apply(conn: Connection, histories: tuple[Migrations, ...]) -> _Moves:
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_MIGRATION_LOCK})
    current = _all_at_head(conn, histories)
    if current is not None:  # the common start: nothing to do, and Alembic is not even imported
        return {name: (revisions, revisions) for name, revisions in current.items()}
    release_version = _legacy_version(conn)
    return {history.name: _upgrade(conn, history, release_version) for history in histories}


def _all_at_head(conn: Connection, histories: tuple[Migrations, ...]) -> dict[str, tuple[str, ...]] | None:
    """Each history's revision when every one is at its head, else ``None`` (Alembic then looks)."""
    tables = set(inspect(conn).get_table_names())
    found: dict[str, tuple[str, ...]] = {}
    for history in histories:
        head = history.head()
        if head is None or history.version_table not in tables:
            return None
        query = text(f"SELECT version_num FROM {history.version_table}")  # noqa: S608 (our own table name)
        revisions = tuple(str(row[0]) for row in conn.execute(query))
        if revisions != (head,):
            return None
        found[history.name] = revisions
    return found


def _log_moves(moves: _Moves) -> None:
    """One INFO line naming the histories that moved; the rest at DEBUG."""
    moved = [
        f"{name} {_shown(before)} -> {_shown(after)}" for name, (before, after) in moves.items() if before != after
    ]
    current = [f"{name} {_shown(after)}" for name, (before, after) in moves.items() if before == after]
    if moved:
        logger.info("schema migrated: %s%s", ", ".join(moved), f" ({len(current)} already current)" if current else "")
    if current:
        logger.debug("schema already current: %s", ", ".join(current))


def _shown(revisions: tuple[str, ...]) -> str:
    return "+".join(revisions) or "(none)"


#: Whether this module set the ``alembic`` logger's level (and may set it again).
_alembic_level_ours = False


def _alembic_details_at_debug() -> None:
    """Alembic logs every step at INFO; show those lines only when this module logs at DEBUG.

    A level the application gave the ``alembic`` logger is left alone.
    """
    global _alembic_level_ours
    alembic = logging.getLogger(_ALEMBIC_LOGGER)
    if alembic.level != logging.NOTSET and not _alembic_level_ours:
        return
    alembic.setLevel(logging.NOTSET if logger.isEnabledFor(logging.DEBUG) else logging.WARNING)
    _alembic_level_ours = True


def _legacy_version(conn: Connection) -> int | None:
    """The old single history's version, or ``None`` on a database that never had it."""
    if not inspect(conn).has_table(LEGACY_VERSION_TABLE):
        return None
    version = conn.execute(text(f"SELECT MAX(version) FROM {LEGACY_VERSION_TABLE}")).scalar_one()  # noqa: S608
    if version is not None and int(version) > _LAST_LEGACY_VERSION:
        raise SchemaTooNewError(
            f"database {LEGACY_VERSION_TABLE} is {version}, newer than any release this mcp-approval knows"
        )
    return None if version is None else int(version)


def _upgrade(
    conn: Connection, history: Migrations, release_version: int | None
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Bring ``history`` to its head; its revisions before and after."""
    from alembic.operations import Operations
    from alembic.runtime.migration import MigrationContext

    script = history.script()
    context = MigrationContext.configure(
        connection=conn,
        opts={"version_table": history.version_table, "fn": functools.partial(_steps_to_head, script)},
    )
    before = context.get_current_heads()
    unknown = [revision for revision in before if revision not in history.revisions()]
    if unknown:
        raise SchemaTooNewError(
            f"the database's {history.name!r} tables are at revision {', '.join(unknown)}, which this "
            "mcp-approval does not know: a newer release migrated it; upgrade mcp-approval instead"
        )
    if not before and release_version is not None:
        stamped = history.legacy_revision(release_version)
        if stamped is not None:
            context.stamp(script, stamped)
    with Operations.context(context):
        context.run_migrations()
    return before, context.get_current_heads()


def _steps_to_head(script: ScriptDirectory, heads: Any, _context: MigrationContext) -> Iterator[RevisionStep]:
    return iter(script._upgrade_revs("heads", heads))
