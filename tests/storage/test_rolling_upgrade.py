"""A rolling upgrade from release 0.2.0 (commit 6854340): its worker and this code's share one PostgreSQL database.

Before the upgrade, a worker of 6854340 (that commit's code, exported from git, run as a real
``serve`` subprocess) serves the treasury deployment on a fresh database and opens two requests
(one with one of its two approvals given). Then the steps of docs/deployment.md ("Rolling
upgrade"), each marked in the test:

1. the new worker gets a copy of the same deployment: the same binding keys and database;
2. it starts beside the old one and migrates the schema (local_0006); it seals nothing, and
   logs at ERROR that the two open requests lack their seals;
3. a worker of 6854340 can no longer start on this database, while the running one goes on:
   calls made on either worker are answered on both, and each worker answers for the other's tasks;
4. reviewers decide on the new worker. What the old code stores there (the requests it opens, a
   decision it records) is unverifiable to the new code until the operator's step: the new
   worker refuses to approve an old request, and shows a request flagged whose denial the old
   worker recorded (the call does not run); the old worker refuses to approve a request the new
   code made;
5. the old worker is stopped (SIGTERM) and a worker of this code takes its place; then the
   operator runs ``mcp-approval upgrade seal-requests`` once: it seals the old code's open
   requests as found and leaves the flagged one; the requests the old code made, pending through
   all of this, complete exactly once;
6. ``mcp-approval audit verify`` finds the chain both versions appended to intact.

Every call ran at most once, and only after a reviewer of the new code approved it or, for a
request the new code made, the new code's reviewers: the deployment folders' ledgers together hold
each exactly once.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import subprocess
import sys
import tarfile
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_approval.checks.wire import Wire
from tests.support import forkserver
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, deployment_dir, principals
from tests.support.upgrade_step import seal_requests
from tests.treasury.helpers import approval_for, assert_approved_executed, assert_denied_not_executed, settled, shown

pytestmark = [pytest.mark.anyio, pytest.mark.postgres, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
RELEASE = "6854340"
#: What the old code's requests read as on the new code until the operator's step.
NO_SEALED_RULES = "the stored request carries no sealed rules"


@pytest.fixture(scope="session")
def release_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``src`` folder of commit 6854340, exported from this clone's git history once per session."""
    if shutil.which("git") is None:
        pytest.skip(f"git is not installed, so commit {RELEASE} cannot be exported")
    found = subprocess.run(
        ["git", "-C", str(ROOT), "cat-file", "-e", f"{RELEASE}^{{commit}}"], capture_output=True, check=False
    )
    if found.returncode != 0:
        pytest.skip(f"commit {RELEASE} is not in this clone's git history (a shallow clone or an sdist)")
    target = tmp_path_factory.mktemp(f"release_{RELEASE}")
    archive = target / "source.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(archive), RELEASE, "src"], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data")
    archive.unlink()
    return target / "src"


class ReleaseServer(TreasuryServer):
    """``python -m mcp_approval serve`` with the code of commit 6854340 (a plain subprocess)."""

    def __init__(self, directory: Path, source: Path, *, db_url: str) -> None:
        super().__init__(directory, db_url=db_url)
        self.source = source

    def launch(
        self, arguments: list[str], environment: dict[str, str]
    ) -> subprocess.Popen[bytes] | forkserver.ForkedProcess:
        """The release's package first on the path; run from the deployment folder, not this checkout."""
        environment = {**environment, "PYTHONPATH": str(self.source)}
        with self.log_path.open("ab") as log:
            return subprocess.Popen(
                [sys.executable, "-m", *arguments],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=environment,
                cwd=self.directory,
            )

    def stop(self, timeout_s: float | None = None) -> int:
        """SIGTERM, as an operator stops a worker, and its exit status."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.wait_exit(timeout_s)


def ran(*servers: TreasuryServer) -> Counter[str]:
    """How many times each account or quarter was acted on, over the servers' ledgers."""
    return Counter(entry.get("to") or entry.get("quarter") for server in servers for entry in server.ledger())


async def call(wire: Wire, tool: str, arguments: dict[str, Any]) -> str:
    """Make a call that needs approval; its task id."""
    created = (await wire.call_tool(tool, arguments)).result
    assert created.get("status") == "working", created
    return str(created["taskId"])


async def approved_by(reviewer: Reviewer, approval_id: str) -> None:
    decided = await reviewer.decide(approval_id, "approve")
    assert decided.status_code == 200, decided.text


async def test_a_rolling_upgrade_from_0_2_0_runs_every_call_once(
    postgres_url: str, release_source: Path, tmp_path: Path
) -> None:
    old = ReleaseServer(deployment_dir(tmp_path, name="old"), release_source, db_url=postgres_url)
    new = TreasuryServer(deployment_dir(tmp_path, name="new"), db_url=postgres_url)
    servers: list[TreasuryServer] = [old, new]
    try:
        # Before: the old worker alone, on a database it migrates itself.
        old.start()
        async with httpx.AsyncClient(base_url=old.base_url, timeout=scaled(20)) as old_http:
            on_old = principals(old_http)
            carol_on_old = Reviewer(old_http, "carol-token")
            early = await call(on_old["alice"], "wire_transfer", {"to": "acct-early", "amount": 26_000})
            quarter = await call(on_old["bob"], "close_quarter", {"quarter": "2026-Q3"})
            early_request = await approval_for(carol_on_old, "wire_transfer", to="acct-early")
            quarter_request = await approval_for(carol_on_old, "close_quarter", quarter="2026-Q3")
            await approved_by(carol_on_old, quarter_request["id"])  # one of the two approvals it needs

            # 1, 2. A new worker on a copy of the deployment joins: it migrates and seals nothing.
            new.start()
            async with httpx.AsyncClient(base_url=new.base_url, timeout=scaled(20)) as new_http:
                migrated = next(line for line in new.log().splitlines() if "schema migrated: " in line)
                assert "audit audit_0003 -> audit_0004" in migrated
                assert "local_backend local_0004 -> local_0008" in migrated
                assert "open approval requests without their seals: 2" in new.log()
                shown_new = await shown(new_http, "dave-token", early_request["id"])
                assert shown_new.json()["integrity_failure"] == NO_SEALED_RULES, shown_new.text
                made_on_old = await _both_serve(old, new, old_http, new_http)

                # 3. An old worker can no longer start on this database (the running one went on, above).
                late_starter = ReleaseServer(
                    deployment_dir(tmp_path, name="restarted"), release_source, db_url=postgres_url
                )
                servers.append(late_starter)
                with pytest.raises(RuntimeError, match="which this mcp-approval does not know"):
                    late_starter.start()

                # A request the old worker makes now stays open across the replacement.
                late = await call(on_old["alice"], "wire_transfer", {"to": "acct-late", "amount": 31_000})
                # Found on the old worker: the new one withholds the content of what it cannot verify.
                late_request = await approval_for(Reviewer(old_http, "dave-token"), "wire_transfer", to="acct-late")

        # 5. The old worker stops; a new worker takes its place (its folder, so its ledger continues).
        # uvicorn shuts down gracefully, then re-raises the SIGTERM it caught.
        assert old.stop() in (0, -signal.SIGTERM), old.log()[-3000:]
        assert "session manager shutting down" in old.log()
        replacement = TreasuryServer(old.directory, db_url=postgres_url)
        replacement.log_path = old.directory / "replacement.log"
        servers.append(replacement.start())
        # What the old code opened and the new code cannot verify: the two from before, the one
        # made on the old worker during the upgrade, and the late one.
        assert "open approval requests without their seals: 4" in replacement.log()
        old_requests = {early_request["id"], quarter_request["id"], made_on_old["request"], late_request["id"]}
        # The operator's one-time step, now that the last old worker stopped.
        step = await asyncio.to_thread(seal_requests, new.directory / "config.toml", "--db", postgres_url, "--json")
        assert step.returncode == 0, step.stdout + step.stderr
        manifest = json.loads(step.stdout)
        assert {entry["request_id"] for entry in manifest["sealed"]} == old_requests
        # The request the new code made and the old one denied (an unsealed decision) stays flagged.
        assert [entry["request_id"] for entry in manifest["left"]] == [made_on_old["denied_by_old"]]
        async with (
            httpx.AsyncClient(base_url=new.base_url, timeout=scaled(20)) as new_http,
            httpx.AsyncClient(base_url=replacement.base_url, timeout=scaled(20)) as replacement_http,
        ):
            on_new, on_replacement = principals(new_http), principals(replacement_http)
            carol, dave = Reviewer(replacement_http, "carol-token"), Reviewer(new_http, "dave-token")
            pending = {item["id"]: item for item in await carol.pending()}
            assert set(pending) == old_requests
            assert all(item["integrity_failure"] is None for item in pending.values()), pending
            await approved_by(carol, early_request["id"])
            await approved_by(dave, quarter_request["id"])  # carol's approval from the old code counts
            await approved_by(dave, late_request["id"])
            await approved_by(dave, made_on_old["request"])
            assert_approved_executed(await settled(on_replacement["alice"], early))
            assert_approved_executed(await settled(on_new["bob"], quarter))
            assert_approved_executed(await settled(on_new["alice"], late))
            assert_approved_executed(await settled(on_new["alice"], made_on_old["task"]))
    finally:
        for server in servers:
            server.kill()

    assert ran(old, new) == {
        "acct-early": 1,
        "2026-Q3": 1,
        "acct-made-on-old": 1,
        "acct-made-on-new": 1,
        "acct-late": 1,
    }
    # 6. The audit chain both versions appended to.
    verified = subprocess.run(  # noqa: ASYNC221 - everything it checks has stopped
        [sys.executable, "-m", "mcp_approval", "audit", "verify", "--db", postgres_url, "--json"],
        capture_output=True,
        text=True,
        timeout=scaled(60),
        check=False,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
    chain = json.loads(verified.stdout)
    # At least one submission and one outcome per request; events of both versions, in one chain.
    assert chain["ok"] is True
    assert chain["broken"] is None
    assert chain["checked"] > 2 * 8, chain


async def _both_serve(
    old: TreasuryServer, new: TreasuryServer, old_http: httpx.AsyncClient, new_http: httpx.AsyncClient
) -> dict[str, str]:
    """Steps 3 and 4: calls made on either worker, reviewers on the new one; each answers for the other's tasks.

    Returns the ids the rest of the test follows: ``task`` and ``request`` of the call made on the
    old worker (pending, unverifiable until the step), ``denied_by_old`` (the request the old
    worker denied).
    """
    on_old, on_new = principals(old_http), principals(new_http)
    carol, carol_on_old = Reviewer(new_http, "carol-token"), Reviewer(old_http, "carol-token")

    # Made on the old worker: the new one shows it flagged and refuses to approve it (the old
    # code stores no rules); it stays pending until the operator's step.
    made_on_old = await call(on_old["alice"], "wire_transfer", {"to": "acct-made-on-old", "amount": 27_000})
    request = await approval_for(carol_on_old, "wire_transfer", to="acct-made-on-old")
    flagged = (await shown(new_http, "carol-token", request["id"])).json()
    assert flagged["integrity_failure"] == NO_SEALED_RULES, flagged
    assert flagged["arguments"] == {}
    refused = await carol.decide(request["id"], "approve")
    assert refused.status_code == 409, refused.text
    assert (await on_new["alice"].get(made_on_old)).result["status"] == "working"

    # Made on the new worker: the old one refuses to approve it (its seal covers the rules, which
    # the old code does not know); approved on the new one, and the old worker reports the outcome.
    made_on_new = await call(on_new["bob"], "wire_transfer", {"to": "acct-made-on-new", "amount": 28_000})
    approval = await approval_for(carol, "wire_transfer", to="acct-made-on-new")
    refused = await carol_on_old.decide(approval["id"], "approve")
    assert refused.status_code == 409, refused.text
    assert "does not match what was submitted" in refused.text
    await approved_by(carol, approval["id"])
    assert_approved_executed(await settled(on_old["bob"], made_on_new))

    # Made on the new worker, denied on the old one: the old code records the denial unsealed,
    # so the new code shows the request flagged. The call does not run, as the denial wants.
    denied_on_old = await call(on_new["bob"], "wire_transfer", {"to": "acct-denied-on-old", "amount": 30_000})
    denied_request = await approval_for(carol, "wire_transfer", to="acct-denied-on-old")
    denied = await carol_on_old.decide(denied_request["id"], "deny")
    assert denied.status_code == 200, denied.text
    assert_denied_not_executed(await settled(on_new["bob"], denied_on_old))
    detail = await shown(new_http, "carol-token", denied_request["id"])
    assert detail.json()["integrity_failure"] == "the decision of carol carries no seal", detail.text
    assert "acct-denied-on-old" not in ran(old, new)
    return {"task": made_on_old, "request": request["id"], "denied_by_old": denied_request["id"]}
