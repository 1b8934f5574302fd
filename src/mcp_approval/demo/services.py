"""Starting the servers the selected scenarios need, all launched at once, then awaited."""

from __future__ import annotations

import asyncio
from collections.abc import Set
from pathlib import Path

from sqlalchemy.engine import make_url

from mcp_approval.demo.narration import Narrator
from mcp_approval.demo.servers import (
    ARAP_SERVER_ADDRESS,
    ARAP_TREASURY_ADDRESS,
    TREASURY_ADDRESS,
    ServerProcess,
    point_at,
)

__all__ = ["ARAP_TREASURY", "NEED_ARAP", "NEED_CREDENTIALS", "start_services"]

#: Scenario needs (``ScenarioSpec.needs``) the runner knows how to start.
NEED_CREDENTIALS = "credentials"
NEED_ARAP = "arap"
#: The name of the ARAP-backed treasury server among the extra servers.
ARAP_TREASURY = "arap-treasury"


def treasury_server(config_path: Path, db_url: str, scratch: Path) -> ServerProcess:
    """``mcp-approval serve`` on the demo deployment (local approval backend)."""
    args = ["serve", "--config", str(config_path), "--db", db_url, "--log-level", "warning"]
    return ServerProcess("mcp-approval serve", args, log_path=scratch / "serve.log")


def credentials_server(scratch: Path) -> ServerProcess:
    """The payments server of scenario 11 (:mod:`mcp_approval.demo.credentials`)."""
    args = ["--ledger", str(scratch / "payments-ledger.jsonl")]
    return ServerProcess(
        "credential server", args, log_path=scratch / "credentials.log", module="mcp_approval.demo.credentials"
    )


def arap_pair(folder: Path, scratch: Path) -> dict[str, ServerProcess]:
    """``mcp-approval arap-server`` (reference PDP + ARS) and ``serve`` on the ARAP backend, addresses filled in.

    Both keep their SQLite stores in the demo folder, whatever ``--db`` says.
    """
    arap_config, treasury_config = folder / "arap-server.toml", folder / "config-arap.toml"
    arap = ServerProcess(
        "mcp-approval arap-server",
        ["arap-server", "--config", str(arap_config), "--log-level", "warning"],
        log_path=scratch / "arap-server.log",
    )
    treasury = ServerProcess(
        "mcp-approval serve (ARAP backend)",
        ["serve", "--config", str(treasury_config), "--log-level", "warning"],
        log_path=scratch / "serve-arap.log",
    )
    addresses = {ARAP_SERVER_ADDRESS: arap.port, ARAP_TREASURY_ADDRESS: treasury.port}
    for config in (arap_config, treasury_config):
        point_at(config, addresses)
    return {NEED_ARAP: arap, ARAP_TREASURY: treasury}


async def start_services(
    config_path: Path,
    db_url: str,
    scratch: Path,
    needs: Set[str],
    servers: list[ServerProcess],
    narrator: Narrator,
) -> tuple[ServerProcess, dict[str, ServerProcess]]:
    """Launch the treasury server and whatever ``needs`` names; return once all listen.

    Every launched process is appended to ``servers`` first, so the caller kills it whatever happens.
    """
    treasury = treasury_server(config_path, db_url, scratch)
    point_at(config_path, {TREASURY_ADDRESS: treasury.port})
    extra: dict[str, ServerProcess] = {}
    if NEED_CREDENTIALS in needs:
        extra[NEED_CREDENTIALS] = credentials_server(scratch)
    if NEED_ARAP in needs:
        extra.update(arap_pair(config_path.parent, scratch))
    everything = (treasury, *extra.values())
    for server in everything:
        servers.append(server)
        server.launch()
    narrator.restart_clock()
    await asyncio.gather(*(server.wait_listening() for server in everything))
    narrator.note(f"{treasury.name} listening: MCP at {treasury.base_url}/mcp, store {_safe(db_url)}")
    for server in extra.values():
        narrator.info(f"   {server.name} listening at {server.base_url}")
    return treasury, extra


def _safe(url: str) -> str:
    """The store URL without a password."""
    return make_url(url).render_as_string(hide_password=True)
