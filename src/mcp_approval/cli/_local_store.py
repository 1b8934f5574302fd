"""Opening a deployment's local-backend store from the command line (``review``, ``upgrade``).

``--config FILE`` reads the store, binding keys and reviewer roles from a deployment file or an
``arap-server`` file. A server built in code (``Approvals``) has no such file: ``--db URL`` names
its store, ``--binding-key-file`` the server's binding keys, ``--role`` the roles a deciding
reviewer holds and ``--template`` the templates of requests stored before their rules were.
"""

from __future__ import annotations

import asyncio
import tomllib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import typer

from mcp_approval.backends import ApprovalTemplate, LocalApprovalBackend, ReviewError
from mcp_approval.backends.contract import UnknownRequestError
from mcp_approval.backends.local.schema import LOCAL_BACKEND_MIGRATIONS
from mcp_approval.cli._terminal import shown
from mcp_approval.config import ConfigError, load_config
from mcp_approval.keyring import binding_cipher
from mcp_approval.server.local_backend import local_backend_from_config
from mcp_approval.storage import AUDIT_MIGRATIONS, Database, StoreUnavailableError, migrate, open_database
from mcp_approval.storage.postgres_url import StoreURLError

__all__ = ["fail", "on_local_backend", "on_local_store"]

T = TypeVar("T")


def fail(message: str) -> typer.Exit:
    """Print ``error: message`` (escaped, one line) on stderr; the exit to raise (status 1)."""
    # Plain text, unwrapped: the message names a file or field that must stay greppable.
    typer.echo(f"error: {shown(message)}", err=True)
    return typer.Exit(1)


def on_local_backend(
    config_path: Path | None,
    db: str | None,
    operation: Callable[[LocalApprovalBackend], Awaitable[T]],
    *,
    roles: Mapping[str, Sequence[str]] | None = None,
    templates: Sequence[str] = (),
    key_file: Path | None = None,
    audited: bool = False,
) -> T:
    """Load the config, open and migrate the store, run ``operation`` on the backend, close the store.

    Without a config, ``db`` names the store (e.g. of a server built with ``Approvals`` in code),
    ``key_file`` its binding keys and ``roles`` the deciding reviewer's roles; ``templates`` are
    decided by the default rules (requests stored before rules were sealed with them).
    ``audited``: the operation writes audit events, so the audit tables are migrated too.
    """
    return on_local_store(
        config_path,
        db,
        lambda backend, _database: operation(backend),
        roles=roles,
        templates=templates,
        key_file=key_file,
        audited=audited,
    )


def on_local_store(
    config_path: Path | None,
    db: str | None,
    operation: Callable[[LocalApprovalBackend, Database], Awaitable[T]],
    *,
    roles: Mapping[str, Sequence[str]] | None = None,
    templates: Sequence[str] = (),
    key_file: Path | None = None,
    audited: bool = False,
) -> T:
    """:func:`on_local_backend` for an operation that also reads the store itself (its ``Database``)."""
    try:
        store_url, backend_of = _backend(config_path, db, roles or {}, templates, key_file)
    except ConfigError as exc:
        raise fail(str(exc)) from None

    async def run() -> T:
        database = open_database(db or store_url)
        try:
            await migrate(database, *((AUDIT_MIGRATIONS,) if audited else ()), LOCAL_BACKEND_MIGRATIONS)
            return await operation(backend_of(database), database)
        finally:
            await database.close()

    try:
        return asyncio.run(run())
    except StoreURLError as exc:  # a store the driver cannot use: the exit status of an unusable store
        typer.echo(f"error: {shown(exc)}", err=True)
        raise typer.Exit(3) from None
    except (ReviewError, StoreUnavailableError, ValueError) as exc:
        raise fail(str(exc)) from None
    except UnknownRequestError:
        raise fail("no such approval request") from None


def _backend(
    path: Path | None,
    db: str | None,
    roles: Mapping[str, Sequence[str]],
    templates: Sequence[str],
    key_file: Path | None,
) -> tuple[str, Callable[[Database], LocalApprovalBackend]]:
    """The store URL and local backend of a deployment file, an ``arap-server`` file, or a bare store."""
    if path is not None and key_file is not None:
        raise ConfigError(f"--binding-key-file is for --db without --config: {path} names its own binding keys")
    if path is None:
        if db is None:
            raise ConfigError(
                "give --config FILE (a deployment file) or --db URL (the store of a server built in code)"
            )
        held = {principal: frozenset(names) for principal, names in roles.items()}
        rules = {name: ApprovalTemplate() for name in templates}
        try:
            seal = None if key_file is None else binding_cipher({}, key_file=key_file)
        except ValueError as exc:
            raise ConfigError(f"--binding-key-file: {exc}") from None
        return db, lambda database: LocalApprovalBackend(
            database, templates=rules, roles=lambda principal: held.get(principal, frozenset()), seal=seal
        )
    if _is_arap_server_file(path):
        from mcp_approval.reference.config import load_arap_config
        from mcp_approval.reference.server import configured_request_seal, reviewer_backend

        arap = load_arap_config(path)
        try:
            seal = configured_request_seal(arap)
        except ValueError as exc:
            raise ConfigError(f"{path}: {exc}") from None
        return arap.store_url(), lambda database: reviewer_backend(arap, database, seal=seal)
    config = load_config(path)
    return config.store_url(), lambda database: local_backend_from_config(config, database, with_resolvers=False)


def _is_arap_server_file(path: Path) -> bool:
    # An arap-server file has [arap] and no [tools]; a deployment (even one using ARAP) has [tools].
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False  # load_config reports it
    return "arap" in document and "tools" not in document
