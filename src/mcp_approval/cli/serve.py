"""``mcp-approval serve``: run a deployment file."""

from __future__ import annotations

import logging
import sys

import typer

from mcp_approval.config import ConfigError, load_config
from mcp_approval.policy.source import PolicyLoadError


def serve(
    config: str = typer.Option(..., "--config", help="The deployment file (TOML)."),
    port: int = typer.Option(8000, help="TCP port."),
    host: str = typer.Option("127.0.0.1", help="Interface to listen on."),
    db: str | None = typer.Option(None, help="Store URL (sqlite:///PATH or postgresql://...); overrides [store]."),
    log_level: str = typer.Option("info", help="Log level."),
) -> None:
    """Serve an approval-gated MCP server: MCP at /mcp, the reviewer API at /approvals."""
    import uvicorn

    from mcp_approval.server.deployment import build_deployment, deployment_app

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        loaded = load_config(config)
        base_url = loaded.server.base_url or f"http://{host}:{port}"
        deployment = build_deployment(loaded, store_url=db, base_url=base_url)
    except (ConfigError, PolicyLoadError, ValueError) as exc:
        typer.echo(f"mcp-approval serve: {exc}", err=True)
        raise typer.Exit(2) from None
    app = deployment_app(deployment)
    uvicorn.run(app, host=host, port=port, log_level="warning")
    sys.exit(0)
