"""ARAP callbacks: only an authentic, fresh, first-time callback bound to a task and its ``state`` wakes ``serve``.

The arap-server here signs its own callbacks with a secret ``serve`` does not share (so they are
mis-signed and refused) and answers pending polls with ``Retry-After: 30``: after the first
look, only a callback this test signs can make ``serve`` read the status again soon. Checklist
item 22; the status endpoint stays authoritative (a callback carries no result).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_approval.backends.arap_wire import callback_state, encode_handle
from mcp_approval.backends.callbacks import CALLBACK_PATH, SIGNATURE_HEADER, sign_callback
from mcp_approval.checks.wire import Wire
from tests.support.arap import ArapDeployment, arap_deployment, handle_of, serve_store
from tests.support.polling import eventually
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, principals, store_rows
from tests.treasury.helpers import approval_for, assert_approved_executed, settled, transfers_to

pytestmark = pytest.mark.anyio
SECRET = "treasury-dev-callback-secret-0001"  # serve's (config-arap.toml)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ArapDeployment]:
    pair = arap_deployment(
        tmp_path_factory.mktemp("arap-callbacks"),
        ars_overrides={"arap": {"retry_after_s": 30, "callback_secret": "an-ars-secret-serve-does-not-know"}},
        proxy=True,
    ).start()
    try:
        yield pair
    finally:
        pair.kill()


@pytest.fixture
async def http(deployment: ArapDeployment) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=deployment.serve.base_url, timeout=scaled(20)) as client:
        yield client


@pytest.fixture
async def carol(deployment: ArapDeployment) -> AsyncIterator[Reviewer]:
    async with httpx.AsyncClient(base_url=deployment.ars.base_url, timeout=scaled(20)) as client:
        yield Reviewer(client, "carol-token")


def submission_key(directory: Path, task_id: str) -> str:
    rows = store_rows(
        serve_store(directory),
        "SELECT idempotency_key FROM approval_intents WHERE task_id = :id ORDER BY generation DESC",
        {"id": task_id},
    )
    assert rows
    return str(rows[0][0])


async def post(
    http: httpx.AsyncClient,
    body: dict[str, Any],
    *,
    secret: str = SECRET,
    at: int | None = None,
    signature: str | None = None,
) -> httpx.Response:
    raw = json.dumps(body).encode()
    header = signature if signature is not None else sign_callback(secret, raw, at or int(time.time()))
    headers = {SIGNATURE_HEADER: header} if header else {}
    return await http.post(CALLBACK_PATH, content=raw, headers=headers)


async def approved_but_asleep(
    deployment: ArapDeployment, http: httpx.AsyncClient, carol: Reviewer, account: str
) -> tuple[Wire, str]:
    """A task approved at the ARS that ``serve`` has not noticed (its own callback was refused)."""
    alice = principals(http)["alice"]
    created = (await alice.call_tool("wire_transfer", {"to": account, "amount": 40_000})).result
    approval = await approval_for(carol, "wire_transfer", to=account)
    # serve's first status poll must be over (it answered pending with Retry-After: 30) before approving.
    assert deployment.proxy is not None
    path = handle_of(deployment.directory, created["taskId"])["status_endpoint"][len(deployment.proxy.base_url) :]
    proxy = deployment.proxy

    async def answered() -> int:
        return len([seen for seen in proxy.requests("GET", path) if seen.status == 200])

    await eventually(answered, lambda n: n >= 1)
    refused_before = deployment.serve.log().count("refused an unauthenticated approval callback")
    assert (await carol.decide(approval["id"], "approve")).status_code == 200
    await eventually(
        lambda: _async(deployment.serve.log().count("refused an unauthenticated approval callback")),
        lambda count: count > refused_before,
        timeout_s=scaled(20),
    )  # the ARS's own (mis-signed) callback was refused
    assert (await alice.get(created["taskId"])).result["status"] == "working"
    return alice, created["taskId"]


async def _async(value: int) -> int:
    return value


async def test_only_an_authentic_bound_callback_wakes_the_server(
    deployment: ArapDeployment, http: httpx.AsyncClient, carol: Reviewer
) -> None:
    alice, task_id = await approved_but_asleep(deployment, http, carol, "acct-cb1")
    handle = handle_of(deployment.directory, task_id)
    state = callback_state(SECRET, submission_key(deployment.directory, task_id))
    task = {"id": handle["id"], "status": "approved", "status_endpoint": handle["status_endpoint"]}
    valid = {"state": state, "task": task}
    refusals = [
        (await post(http, valid, signature=""), 401),  # unsigned
        (await post(http, valid, secret="not-the-shared-secret"), 401),  # mis-signed
        (await post(http, valid, at=int(time.time()) - 3600), 401),  # stale
        (await post(http, {**valid, "state": callback_state(SECRET, "another-key")}), 401),  # wrong state
        (await post(http, {**valid, "state": state + "x"}), 401),
        (await post(http, {"state": state, "task": {**task, "id": "arq_someone_else"}}), 404),  # not ours
        (await post(http, {"state": state, "task": {**task, "status_endpoint": "http://127.0.0.1:1/x"}}), 404),
        (await post(http, {"state": state}), 400),
    ]
    for response, expected in refusals:
        assert response.status_code == expected, (response.status_code, response.text)
    assert (await alice.get(task_id)).result["status"] == "working"  # none of them woke it
    signed_at = int(time.time())
    accepted = await post(http, valid, at=signed_at)
    assert accepted.status_code == 202
    done = await settled(alice, task_id, timeout_s=10)  # well before the next poll (Retry-After: 30)
    assert_approved_executed(done)
    replayed = await post(http, valid, at=signed_at)  # the very same signed message again
    assert replayed.status_code == 409
    assert len(transfers_to(deployment.serve, "acct-cb1")) == 1


async def test_a_callback_is_a_wake_up_not_a_verdict(
    deployment: ArapDeployment, http: httpx.AsyncClient, carol: Reviewer
) -> None:
    """A valid callback claiming ``approved`` for a pending task changes nothing: the GET decides."""
    alice = principals(http)["alice"]
    created = (await alice.call_tool("wire_transfer", {"to": "acct-cb2", "amount": 40_000})).result
    await approval_for(carol, "wire_transfer", to="acct-cb2")
    handle = handle_of(deployment.directory, created["taskId"])
    state = callback_state(SECRET, submission_key(deployment.directory, created["taskId"]))
    body = {"state": state, "task": {**handle, "status": "approved"}, "result": {"mode": "reevaluate"}}
    assert deployment.proxy is not None
    path = handle["status_endpoint"][len(deployment.proxy.base_url) :]
    reads_before = len(deployment.proxy.requests("GET", path))
    assert (await post(http, body)).status_code == 202
    await eventually(lambda: _async(len(deployment.proxy.requests("GET", path))), lambda n: n > reads_before)
    assert (await alice.get(created["taskId"])).result["status"] == "working"  # the GET said pending
    assert transfers_to(deployment.serve, "acct-cb2") == []


async def test_a_bare_handle_callback_is_refused_and_wakes_nothing(
    deployment: ArapDeployment, http: httpx.AsyncClient, carol: Reviewer
) -> None:
    """The older ``{"handle": ...}`` shape would skip the state and single-use checks: 400, nothing read."""
    alice, task_id = await approved_but_asleep(deployment, http, carol, "acct-cb3")
    handle = handle_of(deployment.directory, task_id)
    assert deployment.proxy is not None
    path = handle["status_endpoint"][len(deployment.proxy.base_url) :]
    reads_before = len(deployment.proxy.requests("GET", path))
    stored = encode_handle(handle["id"], handle["status_endpoint"])
    for attempt in range(2):  # also a second time: a refused bare handle is never "accepted"
        refused = await post(http, {"handle": stored}, at=int(time.time()) - attempt)
        assert refused.status_code == 400, refused.text
        assert refused.headers["content-type"].startswith("application/problem+json")
        assert '"state"' in refused.json()["title"]
    assert len(deployment.proxy.requests("GET", path)) == reads_before  # no status read was triggered
    assert (await alice.get(task_id)).result["status"] == "working"
    assert transfers_to(deployment.serve, "acct-cb3") == []
