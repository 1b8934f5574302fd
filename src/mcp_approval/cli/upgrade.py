"""``mcp-approval upgrade``: the one-time steps an upgrade asks of the operator.

``seal-requests`` seals, as found, the approval requests an earlier release stored without their
seals (before revision local_0002 no content seal, before local_0005 no sealed rules or
decisions). No server start does that: until this step runs, such a request is an integrity
failure (nobody may approve it, nothing runs on it). Run it once, after the last worker of the
earlier release stopped; it records what it sealed, and what it left, in a sealed manifest, and
refuses to run a second time. ``--dry-run`` shows what it would seal and writes nothing.

The store and keys come from the deployment (or ``arap-server``) file, or, for a server built in
code, from ``--db`` and ``--binding-key-file`` (``--template`` names the templates of its
requests, decided by the default rules), as for ``mcp-approval review``.
"""

from __future__ import annotations

import getpass
import json
from pathlib import Path

import typer

from mcp_approval.cli._local_store import on_local_backend
from mcp_approval.cli._table import render_table
from mcp_approval.cli._terminal import shown

__all__ = ["upgrade_app"]

upgrade_app = typer.Typer(
    help="One-time steps after upgrading: seal-requests (seal an earlier release's requests, as found).",
    no_args_is_help=True,
    rich_markup_mode=None,  # help as written, as the app's (cli/main.py)
)


_CONFIG = typer.Option(
    None, "--config", help="The deployment (or arap-server) file (TOML); without it, --db names the store."
)
_KEYS = typer.Option(None, "--binding-key-file", help="Without --config: the server's binding keys (as for review).")
_TEMPLATE = typer.Option(
    None, "--template", help="Without --config: a template of the stored requests, sealed with the default rules."
)


@upgrade_app.command("seal-requests")
def seal_requests_command(
    config: Path | None = _CONFIG,
    db: str | None = typer.Option(None, "--db", help="Store URL; overrides the configuration's [store] url."),
    key_file: Path | None = _KEYS,
    template: list[str] | None = _TEMPLATE,
    actor: str | None = typer.Option(
        None, "--as", help="Who runs the step, as the manifest records it (default: the operating-system user)."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would be sealed; write nothing."),
    as_json: bool = typer.Option(False, "--json", help="Print the manifest as JSON."),
) -> None:
    """Seal, once and as found, the approval requests an earlier release stored without seals."""
    who = actor or getpass.getuser()
    manifest = on_local_backend(
        config,
        db,
        lambda backend: backend.seal_requests_stored_before_sealing(actor=who, dry_run=dry_run),
        templates=template or (),
        key_file=key_file,
        audited=True,
    )
    if as_json:
        typer.echo(json.dumps({**manifest.to_json(), "dry_run": dry_run}, indent=2))
        return
    verb = "would seal" if dry_run else "sealed"
    typer.echo(f"{verb} {_requests(len(manifest.sealed))} stored before sealing, as found:")
    if manifest.sealed:
        rows = [
            [
                shown(entry.request_id),
                shown(entry.status),
                shown(entry.tool),
                shown(entry.requester),
                shown(entry.template or "-"),
                ", ".join(f"{shown(reviewer)} {shown(verdict)}" for reviewer, verdict in entry.decisions) or "-",
            ]
            for entry in manifest.sealed
        ]
        typer.echo(render_table(rows, header=("id", "status", "tool", "requester", "template", "decisions")))
    if manifest.left:
        typer.echo(f"left {_requests(len(manifest.left))} as found (each stays an integrity failure):")
        rows = [[shown(entry.request_id), shown(entry.status), shown(entry.why)] for entry in manifest.left]
        typer.echo(render_table(rows, header=("id", "status", "why")))
    if dry_run:
        typer.echo("nothing was written (--dry-run)")
    else:
        typer.echo(f"recorded in the sealed manifest of step {manifest.step!r} by {shown(manifest.actor)}")


def _requests(count: int) -> str:
    return f"{count} approval request" if count == 1 else f"{count} approval requests"
