"""The denials server on stdio, for the transport-without-challenges tests: ``python -m tests.denials.stdio_server``."""

from __future__ import annotations

from tests.denials.support import ServerState, build_denials_server

if __name__ == "__main__":
    build_denials_server(ServerState()).run("stdio")
