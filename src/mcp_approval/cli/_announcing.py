"""A uvicorn server that says on stdout when it accepts connections (a parent process reads that line)."""

from __future__ import annotations

import socket

import uvicorn

from mcp_approval.cli._terminal import shown

__all__ = ["AnnouncingServer"]


class AnnouncingServer(uvicorn.Server):
    """A uvicorn server that prints ``announcement`` (``{url}`` filled in) once it accepts connections."""

    def __init__(self, config: uvicorn.Config, url: str, *, announcement: str) -> None:
        super().__init__(config)
        self.url = url
        self.announcement = announcement

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """Start, then announce the URL on stdout."""
        await super().startup(sockets=sockets)
        if self.started:
            # The URL may come from the configuration: escaped like everything printed that we did not write.
            print(shown(self.announcement.format(url=self.url)), flush=True)
