"""The gated server on stdio: ``python -m tests.approval.stdio_server``."""

from __future__ import annotations

from collections import Counter

from tests.approval.support import build_gated_server, cedar_pdp

if __name__ == "__main__":
    build_gated_server(cedar_pdp(), Counter()).run("stdio")
