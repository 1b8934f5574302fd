"""Several worker processes race to decide the same requests by one similar-call rule: together
they never exceed its use count, and each approved request was decided by exactly one of them
(SQLite and PostgreSQL)."""

from __future__ import annotations

import base64
import json
import os
import random
import secrets
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from mcp_approval.backends import ApprovalStatus, LocalApprovalBackend, SimilarRuleSpec
from mcp_approval.keyring import BindingCipher
from mcp_approval.storage import Database
from tests.backends.conftest import TEMPLATES, roles_of, submission
from tests.support.timing import scaled

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
WORKERS = 3
USES = 5


async def test_worker_processes_never_exceed_the_use_count(db_url: str, database: Database, tmp_path: Path) -> None:
    key = base64.b64encode(os.urandom(32)).decode()
    backend = LocalApprovalBackend(
        database, templates=TEMPLATES, roles=roles_of, seal=BindingCipher.from_base64({"k1": key})
    )
    first = await backend.submit(secrets.token_hex(16), submission())
    _, rule = await backend.approve_similar(first, "bob", SimilarRuleSpec(600, USES))
    handles = [
        await database.write(lambda conn: backend.submit_in(conn, secrets.token_hex(16), submission()))
        for _ in range(16)
    ]
    id_files = []
    for number in range(WORKERS):
        ids_file = tmp_path / f"ids-{number}.json"
        ids_file.write_text(json.dumps(random.sample(handles, len(handles))))
        id_files.append(ids_file)
    won = await anyio.to_thread.run_sync(race, db_url, key, id_files)
    states = await backend.status_many(handles)
    approved = sorted(h for h in handles if states[h].status is ApprovalStatus.APPROVED)
    assert len(approved) == USES
    assert sorted(h for wins in won for h in wins) == approved  # each by exactly one worker
    current = await backend.similar_rule(rule.id)
    assert current is not None
    assert current.uses == USES


def race(db_url: str, key: str, id_files: list[Path]) -> list[list[str]]:
    """Start one worker per file, let them go at once; what each approved."""
    workers = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.backends.similar_rule_worker", db_url, key, str(ids_file)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for ids_file in id_files
    ]
    try:
        for worker in workers:
            assert worker.stdout is not None
            assert worker.stdout.readline().strip() == "ready"
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write("go\n")
            worker.stdin.flush()
        return [json.loads(worker.communicate(timeout=scaled(120))[0]) for worker in workers]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
