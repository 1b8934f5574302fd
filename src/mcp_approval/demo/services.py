"""Starting the servers the selected scenarios need, all launched at once, then awaited."""

from __future__ import annotations

import asyncio
from collections.abc import Set
from pathlib import Path

from mcp_approval.demo.narration import Narrator
from mcp_approval.demo.servers import (
    ARAP_SERVER_ADDRESS,
    ARAP_TREASURY_ADDRESS,
    TREASURY_ADDRESS,
    ServerProcess,
    point_at,
)
from mcp_approval.demo.stores import DemoStores
from mcp_approval.storage.postgres_url import shown_url

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


def arap_pair(folder: Path, scratch: Path, stores: DemoStores) -> dict[str, ServerProcess]:
    """``mcp-approval arap-server`` (reference PDP + ARS) and ``serve`` on the ARAP backend, addresses filled in.

    Each on its store of ``stores``: without one, the SQLite file its config names in the demo folder.
    """
    arap_config, treasury_config = folder / "arap-server.toml", folder / "config-arap.toml"
    arap = ServerProcess(
        "mcp-approval arap-server",
        ["arap-server", "--config", str(arap_config), "--log-level", "warning", *_db(stores.arap_server)],
        log_path=scratch / "arap-server.log",
    )
    treasury = ServerProcess(
        "mcp-approval serve (ARAP backend)",
        ["serve", "--config", str(treasury_config), "--log-level", "warning", *_db(stores.arap_treasury)],
        log_path=scratch / "serve-arap.log",
    )
    addresses = {ARAP_SERVER_ADDRESS: arap.port, ARAP_TREASURY_ADDRESS: treasury.port}
    for config in (arap_config, treasury_config):
        point_at(config, addresses)
    return {NEED_ARAP: arap, ARAP_TREASURY: treasury}


def _db(url: str | None) -> list[str]:
    return [] if url is None else ["--db", url]


async def start_services(
    config_path: Path,
    stores: DemoStores,
    scratch: Path,
    needs: Set[str],
    servers: list[ServerProcess],
    narrator: Narrator,
) -> tuple[ServerProcess, dict[str, ServerProcess]]:
    """Launch the treasury server and whatever ``needs`` names; return once all listen.

    Every launched process is appended to ``servers`` first, so the caller kills it whatever happens.
    """
    treasury = treasury_server(config_path, stores.treasury, scratch)
    point_at(config_path, {TREASURY_ADDRESS: treasury.port})
    extra: dict[str, ServerProcess] = {}
    if NEED_CREDENTIALS in needs:
        extra[NEED_CREDENTIALS] = credentials_server(scratch)
    if NEED_ARAP in needs:
        extra.update(arap_pair(config_path.parent, scratch, stores))
    everything = (treasury, *extra.values())
    for server in everything:
        servers.append(server)
        server.launch()
    narrator.restart_clock()
    await asyncio.gather(*(server.wait_listening() for server in everything))
    narrator.note(f"{treasury.name} listening: MCP at {treasury.base_url}/mcp, store {shown_url(stores.treasury)}")
    for server in extra.values():
        narrator.info(f"   {server.name} listening at {server.base_url}")
    return treasury, extra
