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
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import typer

from mcp_approval.cli._executions import delegation_report, execution_report, verify_keys
from mcp_approval.cli._terminal import shown as escaped
from mcp_approval.config import ConfigError
from mcp_approval.safe_text import terminal_text
from mcp_approval.storage import (
    AUDIT_MIGRATIONS,
    AuditFilter,
    AuditLog,
    ChainVerification,
    Database,
    StoreUnavailableError,
    migrate,
    open_database,
)
from mcp_approval.storage.audit_anchors import (
    Anchor,
    AnchorFinding,
    AnchorFormatError,
    check_anchors,
    is_hash,
    parse_anchor,
    read_anchors,
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
_KEYS = typer.Option(
    None,
    "--binding-key-file",
    help="Without --config: the server's binding keys, to check the execution records' seals.",
)
_OUTPUT = typer.Option(None, "--output", "-o", help="Write here instead of standard output.")

#: ``audit verify`` exits with this when the chain is broken (and 2 when it could not check).
EXIT_BROKEN = 1
_EXIT_ERROR = 2
#: Marks a delegation finding among the execution findings (it is shown as ``delegation: ...``).
_DELEGATED = "\x00delegation\x00"


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
    return _on_store(config_path, db, lambda database: operation(AuditLog(database)))


def _on_store(config_path: Path | None, db: str | None, operation: Callable[[Database], Awaitable[T]]) -> T:
    """Open the store and migrate its audit tables, run ``operation`` on it, close the store."""
    try:
        url = _store_url(config_path, db)
    except ConfigError as exc:
        raise _fail(str(exc)) from None

    async def run() -> T:
        database = open_database(url)
        try:
            await migrate(database, AUDIT_MIGRATIONS)
            return await operation(database)
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
            "Earlier heads kept elsewhere: SEQ:HASH, one line an [audit.anchor] wrote (or the text of its "
            "message), or a file of them, every line of which is checked: positions only grow, and each "
            "anchored event is still at its position with its hash."
        ),
    ),
    key_file: Path | None = _KEYS,
) -> None:
    """Check the audit log's hash chain; name the first broken link and exit 1 if there is one.

    With ``--anchor FILE``, also print one line per anchor of the file that does not hold. Then
    check the executions: name each that has no sealed record or no matching sealed approval, and
    each request (or task generation) executed twice.
    Exit status: 0 the chain (and every anchor, every execution) holds, 1 it does not, 2 it could not be checked.
    """
    given = _anchors(anchor)
    try:
        keys = verify_keys(config, key_file)
    except (ConfigError, ValueError) as exc:
        raise _fail(str(exc)) from None

    async def check(database: Database) -> tuple[ChainVerification, list[AnchorFinding], list[str] | None]:
        log = AuditLog(database)
        found = await log.verify(given.single)
        executions = await execution_report(database, log, keys)
        delegated = await delegation_report(database, keys)
        if delegated:  # the delegations' findings are shown and counted with the executions'
            executions = [*(executions or []), *(_DELEGATED + line for line in delegated)]
        if given.history is None:
            return found, [], executions
        findings = [*given.unreadable, *await check_anchors(log, given.history)]
        return found, sorted(findings, key=lambda finding: finding.line), executions

    found, findings, executions = _on_store(config, db, check)
    wrong = executions or []
    if as_json:
        described = _as_json(found, given, findings)
        if executions is not None:
            described["executions"] = {"ok": not wrong, "findings": wrong}
            described["ok"] = bool(described["ok"]) and not wrong
        typer.echo(json.dumps(described))
    else:
        typer.echo(_describe(found, given, findings))
        for line in wrong:  # an intact store's output stays the chain's one line
            shown = line.removeprefix(_DELEGATED)
            kind = "execution" if shown == line else "delegation"
            typer.echo(f"{kind}: {terminal_text(shown, lines=False)}")
    if not found.ok or findings or wrong:
        raise typer.Exit(EXIT_BROKEN)


@dataclass(frozen=True)
class _GivenAnchors:
    """What ``--anchor`` named: one anchor, or a file's history (its anchors and its unreadable lines)."""

    single: tuple[int, str] | None = None
    history: list[Anchor] | None = None
    unreadable: list[AnchorFinding] = field(default_factory=list)
    source: str = ""


def _anchors(value: str | None) -> _GivenAnchors:
    """``--anchor``: SEQ:HASH, an anchor line, or an anchor file (every line)."""
    if value is None:
        return _GivenAnchors()
    seq, _, digest = value.partition(":")
    if seq.isdigit() and is_hash(digest):
        return _GivenAnchors(single=(int(seq), digest))
    if value.lstrip().startswith("{"):
        return _GivenAnchors(single=_anchor_line(value, value))
    path = Path(value)
    if path.is_file():
        lines = path.read_text(encoding="utf-8").splitlines()
        history, unreadable = read_anchors(lines)
        if not history and not unreadable:
            raise typer.BadParameter(f"{value} holds no anchor", param_hint="--anchor")
        return _GivenAnchors(history=history, unreadable=unreadable, source=value)
    message = f"{value!r} is not SEQ:HASH (a position and 64 hex digits), an anchor line or an anchor file"
    raise typer.BadParameter(message, param_hint="--anchor")


def _anchor_line(line: str, shown: str) -> tuple[int, str]:
    """``(seq, hash)`` of one anchor as ``[audit.anchor]`` writes it (a JSON object)."""
    try:
        anchor = parse_anchor(line)
    except AnchorFormatError as exc:
        raise typer.BadParameter(f"{shown}: {exc}", param_hint="--anchor") from None
    return anchor.seq, anchor.hash


def _as_json(found: ChainVerification, given: _GivenAnchors, findings: list[AnchorFinding]) -> dict[str, object]:
    broken = found.broken
    shown: dict[str, object] | None = None
    if broken is not None:
        shown = {"event_id": broken.event_id, "seq": broken.seq, "reason": broken.reason}
    elif findings:  # the chain holds alone: its first anchor that does not is what is broken
        first = findings[0]
        shown = {"event_id": None, "seq": first.seq, "reason": f"{given.source} line {first.line}: {first.reason}"}
    described: dict[str, object] = {
        "ok": found.ok and not findings,
        "checked": found.checked,
        "head_seq": found.head_seq,
        "head_hash": found.head_hash,
        "broken": shown,
        "rule_decisions": [
            {"request": item.request, "rule": item.rule, "author": item.author, "decision": item.decision}
            for item in found.rule_decisions
        ],
    }
    if given.history is not None:
        described["anchors"] = {
            "file": given.source,
            "checked": len(given.history) + len(given.unreadable),
            "findings": [{"line": item.line, "seq": item.seq, "reason": item.reason} for item in findings],
        }
    return described


def _describe(found: ChainVerification, given: _GivenAnchors, findings: list[AnchorFinding]) -> str:
    rules = [
        f"request {escaped(item.request)} {escaped(item.decision)}d by similar-call rule {escaped(item.rule)} "
        f"written by {escaped(item.author)}"
        for item in found.rule_decisions
    ]
    described = _describe_anchored(found, given, findings)
    return "\n".join([described, *rules])


def _describe_anchored(found: ChainVerification, given: _GivenAnchors, findings: list[AnchorFinding]) -> str:
    lines = [_describe_chain(found)]
    if given.history is None:
        return lines[0]
    total = len(given.history) + len(given.unreadable)
    if not findings:
        return f"{lines[0]}; all {total} anchors of {given.source} hold"
    failing = len({finding.line for finding in findings})
    if found.ok:
        lines[0] = (
            f"audit chain broken against its anchors: {failing} of the {total} anchors of {given.source} do not "
            f"hold (the chain alone holds {found.checked} events, head {found.head_seq} {found.head_hash})"
        )
    lines += [f"{given.source} line {finding.line}: {finding.reason}" for finding in findings]
    return "\n".join(lines)


def _describe_chain(found: ChainVerification) -> str:
    broken = found.broken
    if broken is None:
        return f"audit chain intact: {found.checked} events, head {found.head_seq} {found.head_hash}"
    where = f"event {broken.event_id}" if broken.event_id is not None else "the end of the chain"
    position = f" (position {broken.seq})" if broken.seq is not None else ""
    return f"audit chain broken at {where}{position}: {broken.reason}; {found.checked} events before it are intact"
