"""``mcp-approval review``: list, inspect and decide local approval requests from a terminal.

``--config FILE`` reads the store, binding keys and reviewer roles from a deployment file. A
server built in code (``Approvals``) has no such file: ``--db URL`` names its store,
``--binding-key-file`` the server's binding keys (decisions are sealed under them, or the server
would not count them), and ``--role`` the roles the deciding reviewer holds (whoever can reach
the database and its keys is trusted to say so). Each request is decided by the rules stored
and sealed with it when it was submitted (who decides, how many approvals, self-approval).
"""

from __future__ import annotations

import asyncio
import json
import tomllib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Literal, TypeVar

import typer

from mcp_approval.backends import ApprovalRecord, ApprovalTemplate, LocalApprovalBackend, ReviewError
from mcp_approval.backends.contract import UnknownRequestError
from mcp_approval.backends.local.schema import LOCAL_BACKEND_MIGRATIONS
from mcp_approval.cli._table import render_table
from mcp_approval.config import ConfigError, load_config
from mcp_approval.keyring import binding_cipher
from mcp_approval.reviewers.limits import MAX_PAGE_SIZE
from mcp_approval.server.local_backend import local_backend_from_config
from mcp_approval.storage import Database, StoreUnavailableError, migrate, open_database
from mcp_approval.storage.postgres_url import StoreURLError

__all__ = ["decide_matching", "review_app"]

T = TypeVar("T")

review_app = typer.Typer(
    help="Review approval requests of the local backend: list, show, approve, deny.",
    no_args_is_help=True,
    rich_markup_mode=None,  # help as written, as the app's (cli/main.py)
)

_CONFIG = typer.Option(
    None, "--config", help="The deployment configuration file (TOML); without it, --db names the store."
)
_DB = typer.Option(None, "--db", help="Store URL; overrides the configuration's [store] url.")
_ROLE = typer.Option(
    None,
    "--role",
    help="Without --config: a role the reviewer --as holds (repeat for several).",
)
_KEYS = typer.Option(
    None,
    "--binding-key-file",
    help='Without --config: the server\'s binding keys (a TOML file, key_id = "base64", as its '
    "approval.binding_key_file). Needed to decide: the server counts only decisions sealed under them.",
)
_TEMPLATE = typer.Option(
    None,
    "--template",
    help="Without --config, for requests stored before their rules were (an older release): a policy "
    "template decided by the default rules. Requests stored since carry their own rules.",
)
_JSON = typer.Option(False, "--json", help="Print JSON instead of a table.")
_AS = typer.Option(..., "--as", help="The reviewer deciding (a principal id from the configuration).")
_COMMENT = typer.Option(None, "--comment", help="A comment recorded with the decision.")


def _fail(message: str) -> typer.Exit:
    # Plain text, unwrapped: the message names a file or field that must stay greppable.
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(1)


def _run(
    config_path: Path | None,
    db: str | None,
    operation: Callable[[LocalApprovalBackend], Awaitable[T]],
    *,
    roles: Mapping[str, Sequence[str]] | None = None,
    templates: Sequence[str] = (),
    key_file: Path | None = None,
) -> T:
    """Load the config, open and migrate the store, run ``operation`` on the backend, close the store.

    Without a config, ``db`` names the store (e.g. of a server built with ``Approvals`` in code),
    ``key_file`` its binding keys and ``roles`` the deciding reviewer's roles; ``templates`` are
    decided by the default rules (requests stored before rules were sealed with them).
    """
    try:
        store_url, backend_of = _reviewed(config_path, db, roles or {}, templates, key_file)
    except ConfigError as exc:
        raise _fail(str(exc)) from None

    async def run() -> T:
        database = open_database(db or store_url)
        try:
            await migrate(database, LOCAL_BACKEND_MIGRATIONS)
            return await operation(backend_of(database))
        finally:
            await database.close()

    try:
        return asyncio.run(run())
    except StoreURLError as exc:  # a store the driver cannot use: the exit status of an unusable store
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(3) from None
    except (ReviewError, StoreUnavailableError, ValueError) as exc:
        raise _fail(str(exc)) from None
    except UnknownRequestError:
        raise _fail("no such approval request") from None


def _reviewed(
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


@review_app.command("list")
def list_command(
    config: Path | None = _CONFIG,
    db: str | None = _DB,
    key_file: Path | None = _KEYS,
    status: str = typer.Option("pending", "--status", help="pending or decided."),
    limit: int = typer.Option(MAX_PAGE_SIZE, "--limit", min=1, max=MAX_PAGE_SIZE, help="Requests per page."),
    offset: int = typer.Option(0, "--offset", min=0, help="How many requests to skip (the previous pages)."),
    as_json: bool = _JSON,
) -> None:
    """List pending (or decided) approval requests, one page at a time."""
    if status not in ("pending", "decided"):
        raise _fail(f"--status must be 'pending' or 'decided', not {status!r}")
    wanted: Literal["pending", "decided"] = "pending" if status == "pending" else "decided"
    page = _run(
        config, db, lambda backend: backend.page_requests(wanted, offset=offset, limit=limit), key_file=key_file
    )
    if as_json:
        typer.echo(json.dumps(page.to_json(), indent=2))
        return
    rows: list[list[str]] = []
    for record in page.records:
        approvals = sum(1 for d in record.decisions if d.decision == "approve")
        data = record.to_json()
        rows.append(
            [
                record.id,
                record.status.value,
                record.tool,
                record.requester,
                record.template or "-",
                f"{approvals}/{record.approvals_required}",
                data["expires_at"] or "-",
            ]
        )
    typer.echo(render_table(rows, header=("id", "status", "tool", "requester", "template", "approvals", "expires")))
    for record in page.records:  # under the table, whole: a reviewer must not miss it in a cut cell
        if record.possible_duplicate_of is not None:
            typer.echo(f"{record.id}: {record.possible_duplicate_of.text}")
    if page.next_offset is not None:
        shown = f"{page.offset + 1}-{page.offset + len(page.records)}"
        typer.echo(f"{shown} of {page.total}; the next page: --offset {page.next_offset}")


@review_app.command("show")
def show_command(
    request_id: str,
    config: Path | None = _CONFIG,
    db: str | None = _DB,
    key_file: Path | None = _KEYS,
    as_json: bool = _JSON,
) -> None:
    """Show one approval request with its arguments (redacted) and decisions (checked with the keys, if given)."""
    record = _run(config, db, lambda backend: backend.get_request(request_id), key_file=key_file)
    if record is None:
        raise _fail(f"no approval request {request_id!r}")
    if as_json:
        typer.echo(json.dumps(record.to_json(), indent=2))
    else:
        _print_record(record)


@review_app.command("approve")
def approve_command(
    request_id: str,
    config: Path | None = _CONFIG,
    db: str | None = _DB,
    reviewer: str = _AS,
    comment: str | None = _COMMENT,
    role: list[str] | None = _ROLE,
    key_file: Path | None = _KEYS,
    template: list[str] | None = _TEMPLATE,
) -> None:
    """Approve a request as reviewer ``--as``."""
    decide = _deciding(request_id, reviewer, "approve", comment)
    roles = {reviewer: role or []}
    _print_record(_run(config, db, decide, roles=roles, templates=template or (), key_file=key_file))


@review_app.command("deny")
def deny_command(
    request_id: str,
    config: Path | None = _CONFIG,
    db: str | None = _DB,
    reviewer: str = _AS,
    comment: str | None = _COMMENT,
    role: list[str] | None = _ROLE,
    key_file: Path | None = _KEYS,
    template: list[str] | None = _TEMPLATE,
) -> None:
    """Deny a request as reviewer ``--as``."""
    decide = _deciding(request_id, reviewer, "deny", comment)
    roles = {reviewer: role or []}
    _print_record(_run(config, db, decide, roles=roles, templates=template or (), key_file=key_file))


def _deciding(
    request_id: str, reviewer: str, decision: Literal["approve", "deny"], comment: str | None
) -> Callable[[LocalApprovalBackend], Awaitable[ApprovalRecord]]:
    return lambda backend: backend.decide(request_id, reviewer, decision, comment)


def decide_matching(
    config: Path, tool: str, arguments: Mapping[str, object], reviewer: str, decision: Literal["approve", "deny"]
) -> str | None:
    """``review list`` then ``review approve|deny ID --as REVIEWER``, for the one pending request of
    ``tool`` with exactly ``arguments``: its id, or ``None`` when no such request is pending.

    For ``mcp-approval check --review-config``, which decides many requests in one run. A refused
    decision is reported as the command reports it (one line on stderr, :class:`typer.Exit`).
    """
    wanted = json.dumps(arguments, sort_keys=True)

    async def find_and_decide(backend: LocalApprovalBackend) -> str | None:
        page = await backend.page_requests("pending", offset=0, limit=MAX_PAGE_SIZE)
        found = [
            record.id
            for record in page.records
            if record.tool == tool and json.dumps(record.to_json()["arguments"], sort_keys=True) == wanted
        ]
        if len(found) != 1:
            return None
        await backend.decide(found[0], reviewer, decision, None)
        return found[0]

    return _run(config, None, find_and_decide)


def _print_record(record: ApprovalRecord) -> None:
    data = record.to_json()
    rows: list[tuple[str, str]] = []
    for name in ("id", "status", "tool", "requester", "template", "title", "created_at", "expires_at"):
        rows.append((name, str(data[name] if data[name] is not None else "-")))
    rows.append(("approved_until", str(data["approved_until"] or "-")))
    rows.append(("arguments", json.dumps(data["arguments"], indent=2)))
    rows.append(("approvals_required", str(record.approvals_required)))
    if record.integrity_failure is not None:
        rows.append(("integrity_failure", record.integrity_failure))
    if record.possible_duplicate_of is not None:
        rows.append(("possible_duplicate_of", record.possible_duplicate_of.text))
    for decision in record.decisions:
        note = f" ({decision.comment})" if decision.comment else ""
        rows.append(("decision", f"{decision.reviewer}: {decision.decision}{note}, {decision.to_json()['decided_at']}"))
    typer.echo(render_table(rows))
