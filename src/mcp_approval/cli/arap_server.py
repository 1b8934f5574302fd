"""``mcp-approval arap-server``: run the reference AuthZEN PDP + ARAP Access Request Service.

The socket is bound before the app is built, so ``--port 0`` works: the OS picks a free port and
the base URL (the PDP identifier) is built from it. Once listening, one line goes to stdout::

    arap-server listening on http://127.0.0.1:53187

(a subprocess parent reads that line to learn the URL). ``[arap] base_url`` in the config, or
``--base-url``, replaces the derived URL (e.g. behind a TLS-terminating proxy).
"""

from __future__ import annotations

import logging
import socket
import sys

import typer

__all__ = ["arap_server"]


def arap_server(
    config: str = typer.Option(..., "--config", help="The arap-server configuration file (TOML)."),
    port: int = typer.Option(
        8181, help="TCP port (8181: where the treasury example's PEP looks); 0 lets the OS choose (URL printed)."
    ),
    host: str = typer.Option("127.0.0.1", help="Interface to listen on."),
    db: str | None = typer.Option(None, help="Store URL (sqlite:///PATH or postgresql://...); overrides [store]."),
    base_url: str | None = typer.Option(None, help="The public base URL; overrides [arap] base_url."),
    ssl_certfile: str | None = typer.Option(None, help="TLS certificate (PEM) to serve https directly."),
    ssl_keyfile: str | None = typer.Option(None, help="TLS private key (PEM) for --ssl-certfile."),
    log_level: str = typer.Option("info", help="Log level."),
) -> None:
    """Serve the reference AuthZEN PDP, ARAP Access Request Service and reviewer API on one origin."""
    # Imported here: `mcp-approval --help` and the other commands load neither uvicorn nor the reference services.
    import uvicorn

    from mcp_approval.cli._announcing import AnnouncingServer
    from mcp_approval.cli._collection import resume_collection
    from mcp_approval.cli._terminal import configure_logging, shown_lines
    from mcp_approval.cli.preflight import shown_store_url, store_problem
    from mcp_approval.config import ConfigError
    from mcp_approval.policy.source import PolicyLoadError, TextSource
    from mcp_approval.reference.config import load_arap_config
    from mcp_approval.reference.server import build_arap_server
    from mcp_approval.server.validation import check_requestable_templates
    from mcp_approval.storage.postgres_url import StoreURLError
    from mcp_approval.web.proxies import http_server_settings

    configure_logging(log_level)  # each line escaped: a line may quote what the store holds
    sock = _bind(host, port)
    scheme = "https" if ssl_certfile else "http"
    actual = sock.getsockname()[1]
    try:
        loaded = load_arap_config(config)
        policy = TextSource.read(loaded.resolve(loaded.policy.cedar))
        check_requestable_templates(policy, loaded.templates, config_path=loaded.path)
        url = base_url or loaded.arap.base_url or f"{scheme}://{_url_host(host)}:{actual}"
        server = build_arap_server(loaded, store_url=db, base_url=url)
    except StoreURLError as exc:  # a store the driver cannot use, like one that does not answer
        sock.close()
        typer.echo(f"mcp-approval arap-server: {shown_lines(exc)}", err=True)
        raise typer.Exit(3) from None
    except (ConfigError, PolicyLoadError, ValueError) as exc:
        sock.close()
        typer.echo(f"mcp-approval arap-server: {shown_lines(exc)}", err=True)
        raise typer.Exit(2) from None
    problem = store_problem(db or loaded.store_url())
    if problem is not None:
        sock.close()
        typer.echo(f"mcp-approval arap-server: {shown_lines(problem)}", err=True)
        raise typer.Exit(3)
    store = shown_store_url(db or loaded.store_url())
    logging.getLogger("mcp_approval.reference").info("store %s; reviewer API at %s/approvals", store, url)
    settings = uvicorn.Config(
        server.app,
        log_level="warning",
        ssl_certfile=ssl_certfile,
        ssl_keyfile=ssl_keyfile,
        lifespan="on",
        **http_server_settings(loaded.arap.trusted_proxies),
    )
    runner = AnnouncingServer(settings, url, announcement="arap-server listening on {url}")
    resume_collection()
    runner.run(sockets=[sock])
    sys.exit(0 if runner.started else 1)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        typer.echo(f"mcp-approval arap-server: cannot listen on {host}:{port} ({exc})", err=True)
        raise typer.Exit(2) from None
    sock.set_inheritable(True)
    return sock


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
