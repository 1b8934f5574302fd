"""``mcp-approval audit``: export the audit log as JSON lines, and verify its hash chain.

``--config FILE`` reads the store from a deployment (or ``arap-server``) file; ``--db URL`` names
it directly (e.g. the store of a server built in code) and wins over the file's. Both commands
bring the audit tables to this release's schema first (a database from before the chain gets its
existing events linked as the chain's start).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import typer

from mcp_approval.config import ConfigError
from mcp_approval.storage import (
    AUDIT_MIGRATIONS,
    AuditFilter,
    AuditLog,
    ChainVerification,
    StoreUnavailableError,
    migrate,
    open_database,
)

__all__ = ["audit_app"]

T = TypeVar("T")

audit_app = typer.Typer(
    help="Export the audit log as JSON lines and verify its hash chain.",
    no_args_is_help=True,
    rich_markup_mode=None,  # help as written, as the app's (cli/main.py)
)

_CONFIG = typer.Option(
    None, "--config", help="The deployment (or arap-server) configuration file; without it, --db names the store."
)
_DB = typer.Option(None, "--db", help="Store URL; overrides the configuration's store.")
_OUTPUT = typer.Option(None, "--output", "-o", help="Write here instead of standard output.")

#: ``audit verify`` exits with this when the chain is broken (and 2 when it could not check).
EXIT_BROKEN = 1
_EXIT_ERROR = 2


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(_EXIT_ERROR)


def _store_url(config_path: Path | None, db: str | None) -> str:
    if db is not None:
        return db
    if config_path is None:
        raise ConfigError("give --config FILE (a deployment file) or --db URL (the store)")
    from mcp_approval.cli.review import _is_arap_server_file

    if _is_arap_server_file(config_path):
        from mcp_approval.reference.config import load_arap_config

        return load_arap_config(config_path).store_url()
    from mcp_approval.config import load_config

    return load_config(config_path).store_url()


def _run(config_path: Path | None, db: str | None, operation: Callable[[AuditLog], Awaitable[T]]) -> T:
    """Open and migrate the store, run ``operation`` on its audit log, close the store."""
    try:
        url = _store_url(config_path, db)
    except ConfigError as exc:
        raise _fail(str(exc)) from None

    async def run() -> T:
        database = open_database(url)
        try:
            await migrate(database, AUDIT_MIGRATIONS)
            return await operation(AuditLog(database))
        finally:
            await database.close()

    try:
        return asyncio.run(run())
    except (StoreUnavailableError, ValueError) as exc:
        raise _fail(str(exc)) from None


def _epoch_ms(value: str | None, option: str) -> int | None:
    """An ISO 8601 time (UTC unless it says otherwise) or epoch milliseconds, as epoch ms."""
    if value is None:
        return None
    if value.isdigit():
        return int(value)
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        message = f"{value!r} is neither an ISO 8601 time nor epoch milliseconds"
        raise typer.BadParameter(message, param_hint=option) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


@audit_app.command("export")
def export_command(
    config: Path | None = _CONFIG,
    db: str | None = _DB,
    since: str | None = typer.Option(None, "--since", help="Events at or after this time (ISO 8601 or epoch ms)."),
    until: str | None = typer.Option(None, "--until", help="Events before this time (ISO 8601 or epoch ms)."),
    request: str | None = typer.Option(None, "--request", help="Events about this approval request or task id."),
    principal: str | None = typer.Option(None, "--principal", help="Events this principal or reviewer caused."),
    tool: str | None = typer.Option(None, "--tool", help="Events about requests and tasks for this tool."),
    output: Path | None = _OUTPUT,
) -> None:
    """Write the selected audit events as JSON lines, in chain order, with their chain links.

    Each line has seq, event_id, at (epoch ms), kind, subject, actor, data, prev_hash and hash.
    """
    selection = AuditFilter(
        since_ms=_epoch_ms(since, "--since"),
        until_ms=_epoch_ms(until, "--until"),
        subject=request,
        actor=principal,
        tool=tool,
    )
    sink = output.open("w", encoding="utf-8") if output is not None else sys.stdout

    async def write(log: AuditLog) -> int:
        count = 0
        async for event in log.export(selection):
            sink.write(json.dumps(event.as_json(), separators=(",", ":"), sort_keys=True, ensure_ascii=False) + "\n")
            count += 1
        return count

    try:
        count = _run(config, db, write)
    finally:
        if output is not None:
            sink.close()
    if output is not None:
        typer.echo(f"wrote {count} events to {output}", err=True)


@audit_app.command("verify")
def verify_command(
    config: Path | None = _CONFIG,
    db: str | None = _DB,
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    anchor: str | None = typer.Option(
        None,
        "--anchor",
        help=(
            "An earlier head kept elsewhere: SEQ:HASH, a line an [audit.anchor] wrote, or its file "
            "(the last line). The event at SEQ must still have HASH."
        ),
    ),
) -> None:
    """Check the audit log's hash chain; name the first broken link and exit 1 if there is one.

    Exit status: 0 the chain holds, 1 it is broken, 2 it could not be checked.
    """
    anchored = _anchor(anchor)
    found = _run(config, db, lambda log: log.verify(anchored))
    typer.echo(json.dumps(_as_json(found)) if as_json else _describe(found))
    if not found.ok:
        raise typer.Exit(EXIT_BROKEN)


def _anchor(value: str | None) -> tuple[int, str] | None:
    """The ``(seq, hash)`` of ``--anchor``: SEQ:HASH, an anchor line, or an anchor file's last line."""
    if value is None:
        return None
    seq, _, digest = value.partition(":")
    if seq.isdigit() and _is_hash(digest):
        return int(seq), digest
    if value.lstrip().startswith("{"):
        return _anchor_line(value, value)
    path = Path(value)
    if path.is_file():
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        if not lines:
            raise typer.BadParameter(f"{value} holds no anchor", param_hint="--anchor")
        return _anchor_line(lines[-1], f"the last line of {value}")
    message = f"{value!r} is not SEQ:HASH (a position and 64 hex digits), an anchor line or an anchor file"
    raise typer.BadParameter(message, param_hint="--anchor")


def _anchor_line(line: str, shown: str) -> tuple[int, str]:
    """``(seq, hash)`` of one anchor as ``[audit.anchor]`` writes it (a JSON object)."""
    try:
        anchor = json.loads(line)
    except ValueError:
        anchor = None
    seq = anchor.get("seq") if isinstance(anchor, dict) else None
    digest = anchor.get("hash") if isinstance(anchor, dict) else None
    if type(seq) is not int or seq < 0 or not isinstance(digest, str) or not _is_hash(digest):
        message = f"{shown} is not an anchor: a JSON object with seq (a position) and hash (64 hex digits)"
        raise typer.BadParameter(message, param_hint="--anchor")
    return seq, digest


def _is_hash(text: str) -> bool:
    return len(text) == 64 and not text.strip("0123456789abcdef")


def _as_json(found: ChainVerification) -> dict[str, object]:
    broken = found.broken
    return {
        "ok": found.ok,
        "checked": found.checked,
        "head_seq": found.head_seq,
        "head_hash": found.head_hash,
        "broken": None if broken is None else {"event_id": broken.event_id, "seq": broken.seq, "reason": broken.reason},
    }


def _describe(found: ChainVerification) -> str:
    broken = found.broken
    if broken is None:
        return f"audit chain intact: {found.checked} events, head {found.head_seq} {found.head_hash}"
    where = f"event {broken.event_id}" if broken.event_id is not None else "the end of the chain"
    position = f" (position {broken.seq})" if broken.seq is not None else ""
    return f"audit chain broken at {where}{position}: {broken.reason}; {found.checked} events before it are intact"
