"""``mcp-approval review``: list, inspect and decide local approval requests from a terminal.

``--config FILE`` reads the store, binding keys and reviewer roles from a deployment file. A
server built in code (``Approvals``) has no such file: ``--db URL`` names its store,
``--binding-key-file`` the server's binding keys (decisions are sealed under them, or the server
would not count them), and ``--role`` the roles the deciding reviewer holds (whoever can reach
the database and its keys is trusted to say so). Each request is decided by the rules stored
and sealed with it when it was submitted (who decides, how many approvals, self-approval).

Everything printed from the store (arguments, comments, reviewer and requester names, template
names, texts) is escaped for the terminal (:mod:`mcp_approval.cli._terminal`); ``--json`` output
is ASCII JSON, every control character in it an escape.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Literal

import typer

from mcp_approval.backends import ApprovalRecord, LocalApprovalBackend
from mcp_approval.cli._local_store import _is_arap_server_file as _is_arap_server_file  # audit's import
from mcp_approval.cli._local_store import fail, on_local_backend
from mcp_approval.cli._table import render_table
from mcp_approval.cli._terminal import shown, shown_lines
from mcp_approval.reviewers.limits import MAX_PAGE_SIZE

__all__ = ["decide_matching", "review_app"]

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
    "template decided by the default rules (such a request is unverifiable until `mcp-approval upgrade "
    "seal-requests` seals it: it can only be denied). Requests stored since carry their own rules.",
)
_JSON = typer.Option(False, "--json", help="Print JSON instead of a table.")
_AS = typer.Option(..., "--as", help="The reviewer deciding (a principal id from the configuration).")
_COMMENT = typer.Option(None, "--comment", help="A comment recorded with the decision.")


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
        raise fail(f"--status must be 'pending' or 'decided', not {status!r}")
    wanted: Literal["pending", "decided"] = "pending" if status == "pending" else "decided"
    page = on_local_backend(
        config, db, lambda backend: backend.page_requests(wanted, offset=offset, limit=limit), key_file=key_file
    )
    if as_json:
        typer.echo(json.dumps(page.to_json(), indent=2))
        return
    rows: list[list[str]] = []
    for record in page.records:
        approvals = sum(1 for d in record.decisions if d.decision == "approve")
        data = record.to_json()
        cells = [
            record.id,
            record.status.value,
            record.tool,
            record.requester,
            record.template or "-",
            f"{approvals}/{record.approvals_required}",
            data["expires_at"] or "-",
        ]
        rows.append([shown(cell) for cell in cells])
    typer.echo(render_table(rows, header=("id", "status", "tool", "requester", "template", "approvals", "expires")))
    for record in page.records:  # under the table, whole: a reviewer must not miss it in a cut cell
        if record.possible_duplicate_of is not None:
            typer.echo(f"{shown(record.id)}: {shown(record.possible_duplicate_of.text)}")
        if record.integrity_failure is not None:
            typer.echo(f"{shown(record.id)}: integrity failure: {shown(record.integrity_failure)}")
    if page.next_offset is not None:
        span = f"{page.offset + 1}-{page.offset + len(page.records)}"
        typer.echo(f"{span} of {page.total}; the next page: --offset {page.next_offset}")


@review_app.command("show")
def show_command(
    request_id: str,
    config: Path | None = _CONFIG,
    db: str | None = _DB,
    key_file: Path | None = _KEYS,
    as_json: bool = _JSON,
) -> None:
    """Show one approval request with its arguments (redacted) and decisions (checked with the keys, if given)."""
    record = on_local_backend(config, db, lambda backend: backend.get_request(request_id), key_file=key_file)
    if record is None:
        raise fail(f"no approval request {request_id!r}")
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
    _print_record(on_local_backend(config, db, decide, roles=roles, templates=template or (), key_file=key_file))


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
    _print_record(on_local_backend(config, db, decide, roles=roles, templates=template or (), key_file=key_file))


def _deciding(
    request_id: str, reviewer: str, decision: Literal["approve", "deny"], comment: str | None
) -> Callable[[LocalApprovalBackend], Awaitable[ApprovalRecord]]:
    return lambda backend: backend.decide(request_id, reviewer, decision, comment)


def decide_matching(
    config: Path,
    tool: str,
    arguments: Mapping[str, object],
    reviewer: str,
    decision: Literal["approve", "deny"],
    *,
    comment: str | None = None,
) -> str | None:
    """``review list`` then ``review approve|deny ID --as REVIEWER [--comment TEXT]``, for the one pending
    request of ``tool`` with exactly ``arguments``: its id, or ``None`` when no such request is pending.

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
        await backend.decide(found[0], reviewer, decision, comment)
        return found[0]

    return on_local_backend(config, None, find_and_decide)


def _print_record(record: ApprovalRecord) -> None:
    """The record as a two-column table; every stored text escaped to its line (arguments: ASCII JSON)."""
    data = record.to_json()
    rows: list[tuple[str, str]] = []
    for name in ("id", "status", "tool", "requester", "template", "title", "created_at", "expires_at"):
        rows.append((name, shown(data[name] if data[name] is not None else "-")))
    rows.append(("approved_until", shown(data["approved_until"] or "-")))
    # ASCII JSON: every control and non-ASCII character in a name or value is a \u escape.
    rows.append(("arguments", shown_lines(json.dumps(data["arguments"], indent=2))))
    rows.append(("approvals_required", str(record.approvals_required)))
    if record.integrity_failure is not None:
        rows.append(("integrity_failure", shown(record.integrity_failure)))
    if record.possible_duplicate_of is not None:
        rows.append(("possible_duplicate_of", shown(record.possible_duplicate_of.text)))
    for decision in record.decisions:
        note = f" ({shown(decision.comment)})" if decision.comment else ""
        reviewer = shown(decision.reviewer if decision.reviewer is not None else "-")
        at = decision.to_json()["decided_at"]
        rows.append(("decision", f"{reviewer}: {shown(decision.decision)}{note}, {at}"))
    for told in record.told:  # reminders and escalations: who was told, when, on which channel
        rows.append(("told", shown(told.line())))
    typer.echo(render_table(rows))
