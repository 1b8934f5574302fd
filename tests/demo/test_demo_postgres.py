"""``mcp-approval demo --db postgresql://...``: every scenario on PostgreSQL, the database left as found.

Each of the demo's deployments (the treasury server, the ARAP-backed treasury server,
``arap-server``) works in a schema the run makes for it and drops at the end, as
``mcp_approval.demo.stores`` says.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest

from tests.demo.test_demo import EXPECTED, processes_mentioning, run_demo
from tests.support.timing import scaled

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

#: The schemas and tables a database holds outside PostgreSQL's own.
CONTENTS = (
    "SELECT n.nspname, c.relname FROM pg_namespace n LEFT JOIN pg_class c ON c.relnamespace = n.oid "
    "WHERE n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema' ORDER BY 1, 2"
)

#: The part of a schema's name that names the run (``mcp_approval_demo_<8 hex digits>``).
RUN = re.compile(r"^(mcp_approval_demo_[0-9a-f]{8})_")


def contents(url: str) -> list[tuple[str, str | None]]:
    """Every schema of the database with each relation in it (``None`` for an empty schema)."""

    async def read() -> list[tuple[str, str | None]]:
        conn = await asyncpg.connect(url, timeout=scaled(5))
        try:
            return [(row[0], row[1]) for row in await conn.fetch(CONTENTS)]
        finally:
            await conn.close()

    return asyncio.run(read())


def test_every_scenario_behaves_on_postgresql_and_the_database_is_left_as_found(postgres_url: str) -> None:
    before = contents(postgres_url)
    completed = run_demo("--json", "--db", postgres_url, timeout_s=scaled(360))  # every scenario
    results = json.loads(completed.stdout)
    failures = [r for r in results if r["outcome"] != "pass"]
    assert not failures, json.dumps(failures, indent=2) + completed.stderr[-2000:]
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert {r["scenario"]: (r["disposition"], r["executions"]) for r in results} == EXPECTED
    # Nothing left behind: a second run finds the database as this one found it.
    assert contents(postgres_url) == before


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="lists processes through /proc")
def test_each_deployment_works_in_a_schema_of_the_run_dropped_when_interrupted(
    postgres_url: str, tmp_path: Path
) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    # The schemas of an earlier run in this database (one that was killed) are not this run's.
    earlier = {schema for schema, _ in contents(postgres_url)}
    command = [sys.executable, "-m", "mcp_approval", "demo", "--json", "--only", "12", "--keep-running"]
    demo = subprocess.Popen(
        [*command, "--db", postgres_url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        assert demo.stderr is not None
        guidance = []
        for line in demo.stderr:
            guidance.append(line)
            if "press Ctrl-C" in line:
                break
        assert "press Ctrl-C" in "".join(guidance[-1:]), "".join(guidance)
        tables: dict[str, set[str]] = {}
        for schema, table in contents(postgres_url):
            if schema not in earlier and table is not None:
                tables.setdefault(schema, set()).add(table)
        # Three schemas of this run, one per deployment, each holding that deployment's tables.
        (run,) = {match.group(1) for schema in tables if (match := RUN.match(schema))}
        assert sorted(tables) == sorted(f"{run}_{name}" for name in ("treasury", "arap_treasury", "arap_server"))
        assert {"tasks", "approval_workflows", "approval_requests"} <= tables[f"{run}_treasury"]
        assert "tasks" in tables[f"{run}_arap_treasury"]
        assert "approval_requests" not in tables[f"{run}_arap_treasury"]  # the ARAP backend keeps none
        assert any(name.startswith("arap_") for name in tables[f"{run}_arap_server"])
        assert not [path for path in tmp_path.rglob("*.db")], "no server keeps a SQLite file"
        demo.send_signal(signal.SIGINT)
        stdout, _ = demo.communicate(timeout=scaled(60))
    finally:
        if demo.poll() is None:
            demo.kill()
    assert demo.returncode == 0
    assert [(r["scenario"], r["outcome"]) for r in json.loads(stdout)] == [(12, "pass")]
    assert processes_mentioning(str(tmp_path)) == []
    assert [schema for schema, _ in contents(postgres_url) if schema not in earlier] == []
