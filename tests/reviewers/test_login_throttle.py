"""The limit on failed reviewer sign-ins: the limiter itself, and over HTTP on the console and reviewer API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette

from mcp_approval.clock import ManualClock
from mcp_approval.reviewers.api import reviewer_routes
from mcp_approval.reviewers.console import console_routes
from mcp_approval.storage import SHARED_MIGRATIONS, EventWindow, SqlEventWindow, migrate, open_database
from mcp_approval.web.throttle import (
    DEFAULT_MAX_FAILURES,
    DEFAULT_WINDOW_S,
    FailedLoginThrottle,
)
from tests.approval.inprocess import inprocess_treasury
from tests.reviewers.conftest import Console
from tests.support.store_leg import leg_store_url

pytestmark = pytest.mark.anyio

LIMIT = DEFAULT_MAX_FAILURES
WINDOW_MS = DEFAULT_WINDOW_S * 1000
ATTACKER = "10.0.0.1"
NEIGHBOUR = "10.0.0.2"
GOOD = "bob-token-0123"


@dataclass
class Throttled:
    """The console and reviewer API in one app sharing one default throttle, as ``deployment_app`` wires them."""

    app: Starlette
    clock: ManualClock
    throttle: FailedLoginThrottle
    checked: list[str] = field(default_factory=list)

    @asynccontextmanager
    async def client(self, host: str = ATTACKER) -> AsyncIterator[httpx.AsyncClient]:
        """A client connecting from ``host``."""
        transport = httpx.ASGITransport(app=self.app, client=(host, 123))
        async with httpx.AsyncClient(transport=transport, base_url="http://review.example") as client:
            yield client


@pytest.fixture
def throttled(console: Console) -> Throttled:
    throttle = FailedLoginThrottle(console.clock)
    checked: list[str] = []

    async def authenticate(token: str) -> str | None:
        checked.append(token)
        return console.tokens.get(token)

    routes = [
        *reviewer_routes(console.backend, authenticate, throttle=throttle),
        *console_routes(console.backend, authenticate, console.audit, clock=console.clock, throttle=throttle),
    ]
    return Throttled(Starlette(routes=routes), console.clock, throttle, checked)


async def fail_logins(client: httpx.AsyncClient, times: int = LIMIT) -> None:
    for attempt in range(times):
        response = await client.post("/console/login", data={"token": f"wrong-{attempt}"})
        assert response.status_code == 401, (attempt, response.status_code)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


# -- the console --------------------------------------------------------------------------------


async def test_past_the_limit_even_a_correct_token_is_refused_unchecked_with_retry_after(
    throttled: Throttled,
) -> None:
    async with throttled.client() as client:
        await fail_logins(client)
        throttled.checked.clear()
        response = await client.post("/console/login", data={"token": GOOD})
    assert response.status_code == 429
    assert response.headers["retry-after"] == str(DEFAULT_WINDOW_S)
    assert response.headers["content-type"].startswith("text/html")
    assert "Too many failed sign-ins from your address. Try again in 5 minutes" in response.text
    assert 'name="token"' in response.text  # the login page, with its form
    assert "set-cookie" not in response.headers
    assert throttled.checked == []  # the token was never looked at


async def test_after_the_window_a_correct_token_signs_in(throttled: Throttled) -> None:
    async with throttled.client() as client:
        await fail_logins(client)
        throttled.clock.advance(WINDOW_MS - 1)
        almost = await client.post("/console/login", data={"token": GOOD})
        assert almost.status_code == 429
        assert almost.headers["retry-after"] == "1"  # rounded up: retrying earlier would still be refused
        throttled.clock.advance(1)
        response = await client.post("/console/login", data={"token": GOOD})
        assert response.status_code == 303
        assert response.headers["location"] == "/console"
        assert (await client.get("/console")).status_code == 200


async def test_another_address_is_not_affected(throttled: Throttled) -> None:
    async with throttled.client(ATTACKER) as attacker, throttled.client(NEIGHBOUR) as neighbour:
        await fail_logins(attacker)
        assert (await attacker.post("/console/login", data={"token": GOOD})).status_code == 429
        assert (await neighbour.post("/console/login", data={"token": "wrong"})).status_code == 401
        assert (await neighbour.post("/console/login", data={"token": GOOD})).status_code == 303
        assert (await attacker.post("/console/login", data={"token": GOOD})).status_code == 429


async def test_successes_do_not_count_and_do_not_clear_earlier_failures(throttled: Throttled) -> None:
    async with throttled.client() as client:
        for _ in range(LIMIT + 1):
            assert (await client.post("/console/login", data={"token": GOOD})).status_code == 303
        await fail_logins(client, LIMIT - 1)
        assert (await client.post("/console/login", data={"token": GOOD})).status_code == 303
        await fail_logins(client, 1)  # a valid token interleaved with guesses buys no extra guesses
        assert (await client.post("/console/login", data={"token": GOOD})).status_code == 429


# -- the reviewer API ---------------------------------------------------------------------------


async def test_the_reviewer_api_answers_429_problem_json_after_too_many_bad_tokens(throttled: Throttled) -> None:
    async with throttled.client() as client:
        for attempt in range(LIMIT):
            headers = bearer(f"wrong-{attempt}") if attempt % 2 else {}  # missing tokens count too
            assert (await client.get("/approvals", headers=headers)).status_code == 401
        throttled.checked.clear()
        response = await client.get("/approvals", headers=bearer(GOOD))
    assert response.status_code == 429
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["retry-after"] == str(DEFAULT_WINDOW_S)
    assert response.json() == {
        "type": "about:blank",
        "title": "Too Many Requests",
        "status": 429,
        "detail": "too many failed authentications from this address",
    }
    assert throttled.checked == []
    async with throttled.client(NEIGHBOUR) as neighbour:
        assert (await neighbour.get("/approvals", headers=bearer(GOOD))).status_code == 200


async def test_the_console_and_the_api_share_one_limit(throttled: Throttled) -> None:
    async with throttled.client() as client:
        for _ in range(LIMIT):
            assert (await client.get("/approvals", headers=bearer("wrong"))).status_code == 401
        assert (await client.post("/console/login", data={"token": GOOD})).status_code == 429
    async with throttled.client(NEIGHBOUR) as client:
        await fail_logins(client)
        assert (await client.get("/approvals", headers=bearer(GOOD))).status_code == 429


async def test_a_deployment_shares_one_limit_between_its_reviewer_api_and_console(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path) as harness:
        for _ in range(LIMIT):
            assert (await harness.http.get("/approvals", headers=bearer("not-a-token"))).status_code == 401
        response = await harness.http.post("/console/login", data={"token": "carol-token"})
        assert response.status_code == 429
        assert int(response.headers["retry-after"]) > 0


# -- the limiter --------------------------------------------------------------------------------


@pytest.fixture(params=["memory", "database"])
async def events(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[EventWindow | None]:
    """The default in-memory table, or the store's shared ``rate_events`` table."""
    if request.param == "memory":
        yield None
        return
    database = open_database(leg_store_url(tmp_path, "shared.db"))
    await migrate(database, SHARED_MIGRATIONS)
    try:
        yield SqlEventWindow(database)
    finally:
        await database.close()


async def test_a_key_is_refused_once_it_reaches_the_limit_until_its_oldest_failure_leaves_the_window(
    events: EventWindow | None,
) -> None:
    clock = ManualClock()
    throttle = FailedLoginThrottle(clock, max_failures=3, window_s=60, events=events)
    for _ in range(2):
        await throttle.record_failure("a")
        assert await throttle.retry_after_s("a") is None
        clock.advance(10_000)
    await throttle.record_failure("a")  # failures at 0 s, 10 s and 20 s; now is 20 s
    assert await throttle.retry_after_s("a") == 40
    clock.advance(39_500)
    assert await throttle.retry_after_s("a") == 1
    clock.advance(500)
    assert await throttle.retry_after_s("a") is None  # the 0 s failure left the window: one more try
    await throttle.record_failure("a")
    assert await throttle.retry_after_s("a") == 10  # until the 10 s failure leaves it too


async def test_keys_are_counted_separately(events: EventWindow | None) -> None:
    throttle = FailedLoginThrottle(ManualClock(), max_failures=2, events=events)
    await throttle.record_failure("a")
    await throttle.record_failure("a")
    await throttle.record_failure("b")
    assert await throttle.retry_after_s("a") == DEFAULT_WINDOW_S
    assert await throttle.retry_after_s("b") is None
    assert await throttle.retry_after_s("c") is None


async def test_memory_stays_bounded_when_many_keys_fail() -> None:
    clock = ManualClock()
    throttle = FailedLoginThrottle(clock, max_failures=1, max_clients=100)
    for n in range(5_000):
        await throttle.record_failure(f"10.{n // 65536}.{n // 256 % 256}.{n % 256}")
        assert throttle.tracked_clients() <= 100
    assert throttle.tracked_clients() == 100
    assert await throttle.retry_after_s("10.0.19.135") is not None  # the latest (n = 4999) is still held
    assert await throttle.retry_after_s("10.0.0.0") is None  # the oldest was evicted


async def test_eviction_keeps_the_most_recently_failing_keys() -> None:
    throttle = FailedLoginThrottle(ManualClock(), max_failures=1, max_clients=2)
    await throttle.record_failure("old")
    await throttle.record_failure("other")
    await throttle.record_failure("old")  # failing again makes it the most recent
    await throttle.record_failure("new")
    assert await throttle.retry_after_s("old") is not None
    assert await throttle.retry_after_s("other") is None


async def test_keys_whose_failures_expired_are_forgotten() -> None:
    clock = ManualClock()
    throttle = FailedLoginThrottle(clock, window_s=1)
    await throttle.record_failure("a")
    assert throttle.tracked_clients() == 1
    clock.advance(1_000)
    assert await throttle.retry_after_s("a") is None
    assert throttle.tracked_clients() == 0


@pytest.mark.parametrize("limits", [{"max_failures": 0}, {"window_s": 0}, {"max_clients": 0}])
def test_limits_must_be_positive(limits: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        FailedLoginThrottle(ManualClock(), **limits)
