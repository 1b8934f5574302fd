"""One worker process of the similar-call rule race (run by ``test_similar_rule_workers.py``; not a test module).

Usage: ``python -m tests.backends.similar_rule_worker DATABASE_URL KEY_B64 IDS_FILE``: a local backend
on the store, sealed under the key; prints ``ready``, waits for ``go`` on stdin, puts every request
of IDS_FILE (a JSON list) to the similar-call rules, and prints the JSON list of those it approved.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from mcp_approval.backends import LocalApprovalBackend
from mcp_approval.keyring import BindingCipher
from mcp_approval.storage import open_database
from tests.backends.conftest import TEMPLATES, roles_of


async def run(url: str, key: str, request_ids: list[str]) -> list[str]:
    database = open_database(url)
    backend = LocalApprovalBackend(
        database, templates=TEMPLATES, roles=roles_of, seal=BindingCipher.from_base64({"k1": key})
    )
    try:
        await backend.similar_rules()  # connect before saying ready
        print("ready", flush=True)
        line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        if line.strip() != "go":
            raise SystemExit(f"expected 'go' on stdin, got {line!r}")
        # One at a time in this process (its own order): the race is between the processes.
        return [handle for handle in request_ids if await backend.decide_by_similar_rules(handle) is not None]
    finally:
        await database.close()


if __name__ == "__main__":
    url, key, ids_file = sys.argv[1:4]
    won = asyncio.run(run(url, key, json.loads(Path(ids_file).read_text())))
    print(json.dumps(won), flush=True)
