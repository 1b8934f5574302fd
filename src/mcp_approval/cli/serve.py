"""``mcp-approval serve``: run a deployment file."""

from __future__ import annotations

import logging
import sys

import typer

__all__ = ["serve"]


def serve(
    config: str = typer.Option(..., "--config", help="The deployment file (TOML)."),
    port: int = typer.Option(8000, help="TCP port."),
    host: str = typer.Option("127.0.0.1", help="Interface to listen on."),
    db: str | None = typer.Option(None, help="Store URL (sqlite:///PATH or postgresql://...); overrides [store]."),
    stdio: bool = typer.Option(False, "--stdio", help="Serve one client on stdin/stdout instead of HTTP."),
    log_level: str = typer.Option("info", help="Log level."),
) -> None:
    """Serve an approval-gated MCP server: MCP at /mcp, the reviewer API and console (or MCP on stdio)."""
    # Imported here so that `mcp-approval --help` and the other commands do not load the server.
    import uvicorn

    from mcp_approval.cli._collection import resume_collection
    from mcp_approval.cli._terminal import configure_logging, shown_lines
    from mcp_approval.cli.preflight import shown_store_url, store_problem
    from mcp_approval.config import ConfigError, load_config
    from mcp_approval.policy.source import PolicyLoadError
    from mcp_approval.server.deployment import build_deployment, deployment_app
    from mcp_approval.storage.postgres_url import StoreURLError
    from mcp_approval.web.proxies import http_server_settings

    # Logs go to stderr (on --stdio, stdout carries the protocol), each line escaped for the terminal:
    # a line may quote what the store holds (a request id, an integrity failure).
    configure_logging(log_level)
    try:
        loaded = load_config(config)
        base_url = loaded.server.base_url or f"http://{host}:{port}"
        deployment = build_deployment(loaded, store_url=db, base_url=base_url, stdio=stdio)
    except StoreURLError as exc:  # a store the driver cannot use, like one that does not answer
        typer.echo(f"mcp-approval serve: {shown_lines(exc)}", err=True)
        raise typer.Exit(3) from None
    except (ConfigError, PolicyLoadError, ValueError) as exc:
        typer.echo(f"mcp-approval serve: {shown_lines(exc)}", err=True)
        raise typer.Exit(2) from None
    problem = store_problem(db or loaded.store_url())
    if problem is not None:
        typer.echo(f"mcp-approval serve: {shown_lines(problem)}", err=True)
        raise typer.Exit(3)
    resume_collection()  # the server is built: what follows is its own work
    if stdio:
        deployment.server.run("stdio")  # reviewers decide through `mcp-approval review` on the same store
        sys.exit(0)
    app = deployment_app(deployment)
    reviewers = (
        f"reviewer API at {base_url}/approvals, console at {base_url}/console"
        if loaded.approval.backend == "local"
        else "reviewers decide at the ARAP Access Request Service"
    )
    logging.getLogger("mcp_approval.server").info(
        "serving %s: MCP at %s/mcp, %s, store %s",
        loaded.server.name,
        base_url,
        reviewers,
        shown_store_url(db or loaded.store_url()),
    )
    uvicorn.run(app, host=host, port=port, log_level="warning", **http_server_settings(loaded.server.trusted_proxies))
    sys.exit(0)
