"""``mcp-approval review delegate``, ``review delegations`` and ``review undelegate``: a reviewer hands
their role for a template to another reviewer for a period, lists delegations, revokes one.

A delegation follows the template's rules in the deployment file (``delegation``,
``delegation_max_s``), and is sealed under its binding keys: these commands need ``--config``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import typer

from mcp_approval.backends import LocalApprovalBackend
from mcp_approval.cli._local_store import fail, on_local_backend
from mcp_approval.cli._similar_args import SimilarArgsError, duration_s
from mcp_approval.cli._table import render_table
from mcp_approval.cli._terminal import shown

__all__ = ["register_delegation_commands"]

T = TypeVar("T")
_CONFIG = typer.Option(None, "--config", help="The deployment configuration file (TOML): the templates' rules.")
_DB = typer.Option(None, "--db", help="Store URL; overrides the configuration's [store] url.")


def _config(config: Path | None) -> Path:
    if config is None:
        raise fail("delegations follow the templates' rules and keys in the deployment file: give --config")
    return config


def delegate_command(
    delegate: str = typer.Option(..., "--to", help="The reviewer who decides for you meanwhile."),
    template: str = typer.Option(..., "--template", help="The template whose requests they decide."),
    duration: str = typer.Option(..., "--for", help="How long (3600, 30m, 8h, 3d); at most delegation_max_s."),
    delegator: str = typer.Option(..., "--as", help="The reviewer delegating (holding the template's role)."),
    config: Path | None = _CONFIG,
    db: str | None = _DB,
) -> None:
    """Hand your role for a template to another reviewer from now for a period (--as delegates to --to)."""
    try:
        seconds = duration_s(duration)
    except SimilarArgsError as exc:
        raise fail(str(exc)) from None
    made = _run(config, db, lambda backend: backend.delegate(delegator, delegate, template, seconds))
    data = made.to_json()
    typer.echo(
        f"delegation {shown(made.id)}: {shown(made.delegate)} decides {shown(made.template)} for "
        f"{shown(made.delegator)} until {data['ends_at']}"
    )


def delegations_command(
    reviewer: str | None = typer.Option(None, "--as", help="Only the delegations this reviewer made or received."),
    show_all: bool = typer.Option(False, "--all", help="Also the revoked and expired ones."),
    config: Path | None = _CONFIG,
    db: str | None = _DB,
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """List delegations (active ones unless --all), each checked against its seal."""
    found = _run(config, db, lambda backend: backend.delegations(viewer=reviewer, active_only=not show_all))
    if as_json:
        typer.echo(json.dumps([item.to_json() for item in found], indent=2))
        return
    columns = ("id", "state", "delegator", "delegate", "template", "ends_at")
    rows = [[shown(str(item.to_json()[name])) for name in columns] for item in found]
    typer.echo(render_table(rows, header=("id", "state", "delegator", "delegate", "template", "until")))
    for item in found:  # whole, under the table
        if item.integrity_failure is not None:
            typer.echo(f"{shown(item.id)}: integrity failure: {shown(item.integrity_failure)}")


def undelegate_command(
    delegation_id: str = typer.Argument(..., help="The delegation's id (dlg_...)."),
    reviewer: str = typer.Option(..., "--as", help="The reviewer revoking it (its delegator)."),
    config: Path | None = _CONFIG,
    db: str | None = _DB,
) -> None:
    """Revoke a delegation at once, as its delegator --as."""
    revoked = _run(config, db, lambda backend: backend.revoke_delegation(delegation_id, reviewer))
    typer.echo(f"revoked delegation {shown(revoked.id)} ({shown(revoked.delegator)} to {shown(revoked.delegate)})")


def _run(config: Path | None, db: str | None, operation: Callable[[LocalApprovalBackend], Awaitable[T]]) -> T:
    """``operation`` on the deployment's backend (a refusal is one line on stderr and exit 1)."""
    return on_local_backend(_config(config), db, operation, audited=True)


def register_delegation_commands(app: typer.Typer) -> None:
    """Add ``delegate``, ``delegations`` and ``undelegate`` to ``app`` (``mcp-approval review``)."""
    app.command("delegate")(delegate_command)
    app.command("delegations")(delegations_command)
    app.command("undelegate")(undelegate_command)
