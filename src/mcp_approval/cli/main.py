"""Entry point of the ``mcp-approval`` command."""

from __future__ import annotations

import typer

from mcp_approval.cli.review import review_app
from mcp_approval.cli.serve import serve

app = typer.Typer(
    name="mcp-approval",
    help="Durable MCP tasks, structured authorization denials and approval-gated tool calls.",
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(review_app, name="review")


@app.command("conformance-server")
def conformance_server(
    port: int = typer.Option(..., help="TCP port on 127.0.0.1."),
    db: str = typer.Option("sqlite://", help="Task store URL (sqlite:///PATH, postgresql://...)."),
) -> None:
    """Serve the fixture tools the official MCP conformance suite calls, on 127.0.0.1."""
    from mcp_approval.server.conformance import run_conformance_server

    run_conformance_server(port=port, store_url=db)


app.command("serve")(serve)


@app.command("demo")
def demo(
    db: str | None = typer.Option(None, help="Store URL; a temporary SQLite file by default."),
    as_json: bool = typer.Option(False, "--json", help="Print the scenario results as JSON."),
) -> None:
    """Start a server on loopback and drive every task path with a real MCP client."""
    import asyncio

    from rich.console import Console

    from mcp_approval.cli.tasks_demo import run_tasks_demo

    raise typer.Exit(asyncio.run(run_tasks_demo(db_url=db, as_json=as_json, console=Console())))


def main() -> None:
    """Run the command line."""
    app()
