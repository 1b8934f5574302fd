"""Entry point of the ``mcp-approval`` command."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer
from typer.core import TyperGroup

from mcp_approval.cli._collection import pause_collection, resume_collection
from mcp_approval.cli.arap_server import arap_server
from mcp_approval.cli.check import check
from mcp_approval.cli.check_client import check_client
from mcp_approval.cli.serve import serve

__all__ = ["app", "main"]


class _LazyGroup(TyperGroup):
    """A command group whose module loads only when one of its commands runs (or lists its help).

    Args:
        name: the group's command name.
        help: its help text, repeated here so that ``mcp-approval --help`` need not import it.
        load: imports the group's module and returns its ``typer.Typer``.
    """

    def __init__(self, name: str, help: str, load: Callable[[], typer.Typer]) -> None:
        super().__init__(name=name, help=help, no_args_is_help=True, rich_markup_mode=None)  # as the app's
        self._load = load
        self._loaded: TyperGroup | None = None

    def _group(self) -> TyperGroup:
        if self._loaded is None:
            self._loaded = typer.main.get_group(self._load())
        return self._loaded

    # Context and command types are typer's internal click classes: Any keeps them out of sight.
    def list_commands(self, ctx: Any) -> list[str]:
        """The group's subcommands."""
        return self._group().list_commands(ctx)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        """One subcommand of the group."""
        return self._group().get_command(ctx, cmd_name)


def _review() -> typer.Typer:
    from mcp_approval.cli.review import review_app  # local backend, configuration, store

    return review_app


def _audit() -> typer.Typer:
    from mcp_approval.cli.audit import audit_app  # storage, configuration

    return audit_app


def _upgrade() -> typer.Typer:
    from mcp_approval.cli.upgrade import upgrade_app  # local backend, configuration, store

    return upgrade_app


class _CommandLine(TyperGroup):
    """The top-level group, with ``review``, ``audit`` and ``upgrade`` added lazily."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        review = "Review approval requests of the local backend: list, show, approve, deny."
        self.add_command(_LazyGroup("review", review, _review))
        audit = "Export the audit log as JSON lines and verify its hash chain."
        self.add_command(_LazyGroup("audit", audit, _audit))
        upgrade = "One-time steps after upgrading: seal-requests (seal an earlier release's requests, as found)."
        self.add_command(_LazyGroup("upgrade", upgrade, _upgrade))


app = typer.Typer(
    name="mcp-approval",
    help="Durable MCP tasks, structured authorization denials and approval-gated tool calls.",
    no_args_is_help=True,
    add_completion=False,
    cls=_CommandLine,
    # Help is printed as written: in typer's default markup mode a help text's "[store]" or
    # "[audit.anchor]" is read as a style and dropped. (Every sub-app says the same.)
    rich_markup_mode=None,
)


@app.command("conformance-server")
def conformance_server(
    port: int = typer.Option(..., help="TCP port on 127.0.0.1."),
    db: str = typer.Option("sqlite://", help="Task store URL (sqlite:///PATH, postgresql://...)."),
) -> None:
    """Serve the fixture tools the official MCP conformance suite calls, on 127.0.0.1."""
    from mcp_approval.testing.conformance import run_conformance_server

    run_conformance_server(port=port, store_url=db)


#: Commands that resume collection themselves, once their server is built (their start is the figure
#: operators wait on).
_RESUME_WHEN_SERVING = frozenset({"serve", "arap-server"})


def _print_version(wanted: bool) -> None:
    if not wanted:
        return
    # The installed metadata, as mcp_approval.__version__ reads it (the package root is above this layer).
    from importlib.metadata import PackageNotFoundError, version

    try:
        typer.echo(f"mcp-approval {version('mcp-approval')}")
    except PackageNotFoundError:
        typer.echo("mcp-approval 0+unknown")
    raise typer.Exit()


@app.callback()
def _resume_collection(
    ctx: typer.Context,
    version: bool = typer.Option(
        False, "--version", is_eager=True, expose_value=False, callback=_print_version, help="Print the version, exit."
    ),
) -> None:
    # Runs once the command's module is loaded, before the command itself.
    if ctx.invoked_subcommand not in _RESUME_WHEN_SERVING:
        resume_collection()


app.command("serve")(serve)
app.command("arap-server")(arap_server)
app.command("check")(check)
app.command("check-client")(check_client)


@app.command("demo")
def demo(
    db: str | None = typer.Option(
        None,
        help=(
            "Store URL: postgresql://... runs every scenario's servers there, each deployment in a schema"
            " of the run's own, dropped at the end; sqlite:///PATH is the local-backend server's file"
            " (kept). Temporary SQLite files by default."
        ),
    ),
    only: str | None = typer.Option(None, "--only", help="Scenario numbers to run, e.g. 2,8 (default: all)."),
    as_json: bool = typer.Option(False, "--json", help="Print only the results, as JSON (schema above)."),
    keep_running: bool = typer.Option(
        False, "--keep-running", help="Leave the servers up afterwards and say how to use them (Ctrl-C stops)."
    ),
) -> None:
    """Start `serve` on loopback and drive every approval scenario with a real MCP client over HTTP.

    Scenarios: 1 small transfer; 2 approved transfer; 3 denied transfer; 4 automatic refund; 5 four
    eyes; 6 cancel while pending; 7 expiry; 8 crash and resume; 9 client without tasks: approved; 10
    url-mode approval; 11 credential remediation; 12 ARAP backend; 13 client without tasks: denied;
    14 notifications; 15 client without tasks: requester page; 16 operator metrics; 17 Slack,
    interactive; 18 Teams card; 19 decide from e-mail; 20 nobody forgotten; 21 sign-in with the
    identity provider; 22 passkey step-up; 23 approve similar; 24 delegation while away.

    Exits 0 only if every selected scenario behaved. With --json, stdout is a list with one
    object per scenario, keys in this order: scenario (int), name (str), outcome ("pass" or
    "fail"), disposition (the tool-approval disposition the client read, or null), executions
    (ledger entries the scenario left, counted from the ledger file), detail (str), seconds (float).
    """
    from rich.console import Console

    from mcp_approval.demo import DemoOptions, parse_only, run_demo

    try:
        selected = parse_only(only)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--only") from None
    options = DemoOptions(db_url=db, only=selected, as_json=as_json, keep_running=keep_running)
    raise typer.Exit(run_demo(options, Console()))


@app.command("demo-tasks")
def demo_tasks(
    db: str | None = typer.Option(None, help="Store URL; a temporary SQLite file by default."),
    as_json: bool = typer.Option(False, "--json", help="Print the scenario results as JSON."),
) -> None:
    """Start a tasks-only server on loopback and drive every task path with a real MCP client."""
    import asyncio

    from rich.console import Console

    from mcp_approval.cli.tasks_demo import run_tasks_demo

    raise typer.Exit(asyncio.run(run_tasks_demo(db_url=db, as_json=as_json, console=Console())))


def main() -> None:
    """Run the command line."""
    pause_collection()
    app()
