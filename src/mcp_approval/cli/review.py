"""``mcp-approval review``: list, inspect and decide local approval requests from a terminal (one
or several at once, each on its own), write (``approve --similar``), list and revoke similar-call rules,
and delegate a reviewer's role for a template (``delegate``, ``delegations``, ``undelegate``).

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
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Literal

import typer

from mcp_approval.approval.persistence.outcomes import reference_of_request, request_of_reference
from mcp_approval.backends import ApprovalRecord, LocalApprovalBackend, ReviewError
from mcp_approval.backends.contract import UnknownRequestError
from mcp_approval.cli._local_store import _is_arap_server_file as _is_arap_server_file  # audit's import
from mcp_approval.cli._local_store import fail, on_local_backend, on_local_store
from mcp_approval.cli._review_delegations import register_delegation_commands
from mcp_approval.cli._similar_args import SimilarArgsError, similar_spec
from mcp_approval.cli._table import render_table
from mcp_approval.cli._terminal import shown, shown_lines
from mcp_approval.reviewers.limits import MAX_PAGE_SIZE
from mcp_approval.safe_text import storable
from mcp_approval.storage import Database

__all__ = ["decide_matching", "review_app"]

review_app = typer.Typer(
    help="Review approval requests of the local backend: list, show, approve, deny; similar-call rules; delegations.",
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
_ARG = typer.Option(
    None,
    "--arg",
    help="With --similar: NAME=equal:JSON | NAME=one-of:A,B | NAME=range:LOW..HIGH | NAME=prefix:TEXT "
    "(repeat; an argument not named must stay equal).",
)
_IDS = typer.Argument(..., help="The request id, or several (each is decided on its own).")


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
    """Show one approval request with its arguments (redacted) and decisions (checked with the keys, if given).

    REQUEST_ID is the request's id or the reference its requester was given (the task's id).
    """
    _known_id(request_id)

    async def lookup(backend: LocalApprovalBackend, database: Database) -> tuple[ApprovalRecord | None, str | None]:
        record = await backend.get_request(request_id)
        if record is None:
            handle = await request_of_reference(database, request_id)
            record = await backend.get_request(handle) if handle is not None else None
        reference = await reference_of_request(database, record.id) if record is not None else None
        return record, reference

    record, reference = on_local_store(config, db, lookup, key_file=key_file)
    if record is None:
        raise fail(f"no approval request has the id or reference {request_id!r}")
    if as_json:
        typer.echo(json.dumps({**record.to_json(), "reference": reference}, indent=2))
    else:
        _print_record(record, reference)


@review_app.command("approve")
def approve_command(
    request_ids: list[str] = _IDS,
    config: Path | None = _CONFIG,
    db: str | None = _DB,
    reviewer: str = _AS,
    comment: str | None = _COMMENT,
    role: list[str] | None = _ROLE,
    key_file: Path | None = _KEYS,
    template: list[str] | None = _TEMPLATE,
    similar: bool = typer.Option(
        False, "--similar", help="Also write a similar-call rule approving later calls like this one (needs --config)."
    ),
    duration: str | None = typer.Option(None, "--for", help="With --similar: how long the rule lasts (3600, 30m, 8h)."),
    uses: int | None = typer.Option(None, "--uses", min=1, help="With --similar: how many later calls it may decide."),
    any_principal: bool = typer.Option(
        False, "--any-principal", help="With --similar: calls by any requester (by default, this request's only)."
    ),
    arg: list[str] | None = _ARG,
) -> None:
    """Approve one request, or several (each on its own), as reviewer ``--as``."""
    roles = {reviewer: role or []}
    if similar:
        if len(request_ids) != 1:
            raise fail("--similar writes a rule from one request: name exactly one")
        if config is None:
            raise fail("--similar follows the template's limits in the deployment file: give --config")
        _known_id(request_ids[0])
        try:
            spec = similar_spec(duration=duration, uses=uses, any_principal=any_principal, arguments=arg or [])
        except SimilarArgsError as exc:
            raise fail(str(exc)) from None
        record, rule = on_local_backend(
            config, db, lambda backend: backend.approve_similar(request_ids[0], reviewer, spec, comment), audited=True
        )
        _print_record(record)
        typer.echo(f"similar-call rule {shown(rule.id)}: {shown(rule.to_json()['scope'])}")
        typer.echo(f"  until {rule.to_json()['expires_at']}, at most {rule.max_uses} calls")
        return
    if duration is not None or uses is not None or any_principal or arg:
        raise fail("--for, --uses, --any-principal and --arg go with --similar")
    _decide_each(config, db, request_ids, reviewer, "approve", comment, roles, template or (), key_file)


@review_app.command("deny")
def deny_command(
    request_ids: list[str] = _IDS,
    config: Path | None = _CONFIG,
    db: str | None = _DB,
    reviewer: str = _AS,
    comment: str | None = _COMMENT,
    role: list[str] | None = _ROLE,
    key_file: Path | None = _KEYS,
    template: list[str] | None = _TEMPLATE,
) -> None:
    """Deny one request, or several (each on its own), as reviewer ``--as``."""
    roles = {reviewer: role or []}
    _decide_each(config, db, request_ids, reviewer, "deny", comment, roles, template or (), key_file)


def _decide_each(
    config: Path | None,
    db: str | None,
    request_ids: Sequence[str],
    reviewer: str,
    decision: Literal["approve", "deny"],
    comment: str | None,
    roles: Mapping[str, Sequence[str]],
    templates: Sequence[str],
    key_file: Path | None,
) -> None:
    """Decide each request on its own: one the record, several a line each; exit 1 if any was refused."""
    if len(request_ids) == 1:
        _known_id(request_ids[0])
        decide = _deciding(request_ids[0], reviewer, decision, comment)
        _print_record(on_local_backend(config, db, decide, roles=roles, templates=templates, key_file=key_file))
        return

    async def each(backend: LocalApprovalBackend) -> list[tuple[str, str | None]]:
        outcomes: list[tuple[str, str | None]] = []
        for request_id in request_ids:
            if not storable(request_id):
                outcomes.append((request_id, "no such approval request"))
                continue
            try:
                record = await backend.decide(request_id, reviewer, decision, comment)
            except UnknownRequestError:
                outcomes.append((request_id, "no such approval request"))
            except ReviewError as exc:
                outcomes.append((request_id, str(exc)))
            else:
                outcomes.append((request_id, f"ok: {record.status.value}"))
        return outcomes

    outcomes = on_local_backend(config, db, each, roles=roles, templates=templates, key_file=key_file)
    refused = 0
    for request_id, outcome in outcomes:
        if outcome is not None and outcome.startswith("ok: "):
            typer.echo(f"{shown(request_id)}: {shown(outcome[4:])}")
        else:
            refused += 1
            typer.echo(f"{shown(request_id)}: refused: {shown(outcome or '')}", err=True)
    typer.echo(f"{len(outcomes) - refused} of {len(outcomes)} decided")
    if refused:
        raise typer.Exit(1)


def _known_id(request_id: str) -> None:
    """Refuse an id no store can hold (a NUL, or bytes that are not UTF-8): no request has it."""
    if not storable(request_id):
        raise fail(f"no approval request {shown(request_id)}")


def _deciding(
    request_id: str, reviewer: str, decision: Literal["approve", "deny"], comment: str | None
) -> Callable[[LocalApprovalBackend], Awaitable[ApprovalRecord]]:
    return lambda backend: backend.decide(request_id, reviewer, decision, comment)


@review_app.command("rules")
def rules_command(
    config: Path | None = _CONFIG,
    db: str | None = _DB,
    key_file: Path | None = _KEYS,
    show_all: bool = typer.Option(False, "--all", help="Also the revoked, expired and used-up rules."),
    as_json: bool = _JSON,
) -> None:
    """List similar-call rules (active ones unless --all), each checked against its seal."""
    rules = on_local_backend(
        config, db, lambda backend: backend.similar_rules(active_only=not show_all), key_file=key_file
    )
    if as_json:
        typer.echo(json.dumps([rule.to_json() for rule in rules], indent=2))
        return
    rows = [
        [
            shown(str(cell))
            for cell in (r["id"], r["state"], r["author"], f"{r['uses']}/{r['max_uses']}", r["expires_at"])
        ]
        for r in (rule.to_json() for rule in rules)
    ]
    typer.echo(render_table(rows, header=("id", "state", "author", "uses", "expires")))
    for rule in rules:  # whole, under the table
        data = rule.to_json()
        typer.echo(f"{shown(rule.id)}: {shown(data['scope'] or data['integrity_failure'] or '')}")


@review_app.command("revoke")
def revoke_command(
    rule_id: str,
    config: Path | None = _CONFIG,
    db: str | None = _DB,
    reviewer: str = _AS,
    role: list[str] | None = _ROLE,
    key_file: Path | None = _KEYS,
) -> None:
    """Revoke a similar-call rule at once, as reviewer ``--as`` (its author, or a reviewer of its template)."""
    rule = on_local_backend(
        config,
        db,
        lambda backend: backend.revoke_similar_rule(rule_id, reviewer),
        roles={reviewer: role or []},
        key_file=key_file,
        audited=True,
    )
    typer.echo(f"revoked similar-call rule {shown(rule.id)} ({rule.uses} of {rule.max_uses} calls decided)")


register_delegation_commands(review_app)


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


def _print_record(record: ApprovalRecord, reference: str | None = None) -> None:
    """The record as a two-column table; every stored text escaped to its line (arguments: ASCII JSON).

    ``reference``: the one its requester was given, when known.
    """
    data = record.to_json()
    rows: list[tuple[str, str]] = []
    for name in ("id", "status", "tool", "requester", "template", "title", "created_at", "expires_at"):
        rows.append((name, shown(data[name] if data[name] is not None else "-")))
        if name == "id" and reference is not None:
            rows.append(("reference", shown(reference)))
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
        reviewer = shown(decision.decided_by if decision.reviewer is not None else "-")
        at = decision.to_json()["decided_at"]
        rows.append(("decision", f"{reviewer}: {shown(decision.decision)}{note}, {at}"))
    for told in record.told:  # reminders and escalations: who was told, when, on which channel
        rows.append(("told", shown(told.line())))
    typer.echo(render_table(rows))
