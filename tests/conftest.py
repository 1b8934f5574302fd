"""Shared fixtures: database URLs for both supported databases, and in-process servers."""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, NoReturn
from urllib.parse import urlencode

import httpx
import pytest

from mcp_approval.checks.wire import Wire
from mcp_approval.clock import Clock
from mcp_approval.hosts import PORT_SLICE_VARIABLE
from mcp_approval.tasks import TaskOptions, TasksExtension, store_from_url
from mcp_approval.testing.tasks_demo import DEMO_TOKENS, build_tasks_demo_server
from tests.support import store_leg, timing
from tests.support.browser import artifacts as artifacts  # the browser tests' fixtures
from tests.support.browser import chromium as chromium
from tests.support.timing import scaled

#: Set in CI: a database test that cannot reach its server fails instead of skipping.
REQUIRE_SERVICES = os.environ.get("MCP_APPROVAL_REQUIRE_SERVICES") == "1"
POSTGRES_ADMIN_URL = os.environ.get("MCP_APPROVAL_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("MCP_APPROVAL_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
BASE_URL = "http://127.0.0.1:8000"


def _slice_ports_between_workers() -> None:
    """Under pytest-xdist, give each worker (and the servers it starts) its own slice of ports."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER", ""), os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if worker.startswith("gw") and count.isdigit():
        os.environ[PORT_SLICE_VARIABLE] = f"{int(worker[2:])}/{int(count)}"


_slice_ports_between_workers()


#: The JUnit XML property under which a test reports the SEP conformance checks it covers.
CHECK_PROPERTY = "sep-check"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "postgres: needs PostgreSQL")
    config.addinivalue_line("markers", "sep_check(*ids): the SEP conformance check ids this test covers")
    try:  # measured once, here in the controlling process; its workers inherit the variable
        timing.time_scale()
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    if not hasattr(config, "workerinput"):  # the controlling process, before xdist starts its workers
        store_leg.start_run()


def pytest_report_header() -> str:
    return timing.describe()


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):  # every worker has ended
        store_leg.drop_run_databases()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``@pytest.mark.sep_check(...)`` ids become ``sep-check`` properties of the JUnit XML record.

    ``scripts/sep_matrix.py`` reads them back against ``conformance/sep-NNNN.yaml``. The per-test
    hang limit of ``pyproject.toml`` (pytest-timeout) is scaled like every other wait limit, unless
    ``--timeout`` or ``PYTEST_TIMEOUT`` names one for this run.
    """
    hang_limit_s = float(config.getini("timeout") or 0) if config.pluginmanager.hasplugin("timeout") else 0.0
    if hang_limit_s and config.getoption("timeout", None) is None and "PYTEST_TIMEOUT" not in os.environ:
        for item in items:
            if item.get_closest_marker("timeout") is None:
                item.add_marker(pytest.mark.timeout(scaled(hang_limit_s)))
    for item in items:
        for marker in item.iter_markers("sep_check"):
            if not marker.args or not all(isinstance(arg, str) and arg for arg in marker.args):
                raise pytest.UsageError(f"{item.nodeid}: sep_check needs one or more non-empty id strings")
            item.user_properties.extend((CHECK_PROPERTY, check) for check in marker.args)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _postgres_database() -> Iterator[str]:
    """Create a private database for this test session; skip (or fail in CI) without a server."""
    import asyncpg

    name = f"mcpa_test_{secrets.token_hex(4)}"

    async def admin(statement: str) -> None:
        conn = await asyncpg.connect(POSTGRES_ADMIN_URL, timeout=scaled(5))
        try:
            await conn.execute(statement)
        finally:
            await conn.close()

    try:
        asyncio.run(admin(f'CREATE DATABASE "{name}"'))
    except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
        message = f"PostgreSQL not reachable at {POSTGRES_ADMIN_URL} ({type(exc).__name__}: {exc})"
        if REQUIRE_SERVICES:
            pytest.fail(message + "; MCP_APPROVAL_REQUIRE_SERVICES=1 requires it")
        pytest.skip(message + "; set MCP_APPROVAL_TEST_POSTGRES_URL to run the PostgreSQL tests")
    base = POSTGRES_ADMIN_URL.rsplit("/", 1)[0]
    try:
        yield f"{base}/{name}"
    finally:
        asyncio.run(admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[str]:
    yield from _postgres_database()


@pytest.fixture
def postgres_url(postgres_database: str) -> str:
    """A PostgreSQL URL whose database holds no tables of a previous test."""
    import asyncpg

    async def reset() -> None:
        conn = await asyncpg.connect(postgres_database.replace("postgresql://", "postgres://"), timeout=scaled(5))
        try:
            await conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public;")
        finally:
            await conn.close()

    asyncio.run(reset())
    return postgres_database


@pytest.fixture
def redis_url() -> Iterator[str]:
    """A Redis store URL with a key prefix of its own; its keys are deleted afterwards.

    Skips (or fails in CI) without a server or without the ``redis`` package.
    """
    yield from _redis_store_url()


def _redis_store_url() -> Iterator[str]:
    try:
        import redis
    except ImportError as exc:
        _unreachable(f"the redis package is not installed ({exc})", "pip install 'mcp-approval[redis]'")
    prefix = f"mcpa-test-{secrets.token_hex(4)}:"
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=scaled(5), socket_timeout=scaled(5))
    try:
        client.ping()
    except (OSError, redis.RedisError) as exc:
        client.close()
        _unreachable(
            f"Redis not reachable at {REDIS_URL} ({type(exc).__name__}: {exc})", "set MCP_APPROVAL_TEST_REDIS_URL"
        )
    separator = "&" if "?" in REDIS_URL else "?"
    try:
        yield f"{REDIS_URL}{separator}{urlencode({'prefix': prefix})}"
    finally:
        for key in client.scan_iter(match=f"{prefix}*", count=500):
            client.delete(key)
        client.close()


#: The three task stores, as fixture params: SQLite always, PostgreSQL and Redis when their servers answer.
STORES = [
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("redis", marks=pytest.mark.redis),
]


@pytest.fixture(scope="module", params=STORES)
def module_store_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A fresh store of each kind (SQLite, PostgreSQL, Redis) shared by one module's tests.

    PostgreSQL gets a database of its own and Redis a key prefix of its own, both removed afterwards.
    """
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('store') / 'tasks.db'}"
    elif request.param == "postgres":
        yield request.getfixturevalue("module_postgres_url")
    else:
        yield from _redis_store_url()


@pytest.fixture(scope="module")
def module_postgres_url() -> Iterator[str]:
    """A PostgreSQL database of one module's own, dropped after the module's tests."""
    yield from _postgres_database()


def _unreachable(message: str, remedy: str) -> NoReturn:
    if REQUIRE_SERVICES:
        pytest.fail(message + "; MCP_APPROVAL_REQUIRE_SERVICES=1 requires it")
    pytest.skip(f"{message}; {remedy} to run the Redis tests")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    """A fresh database of each supported kind."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'tasks.db'}"
    return str(request.getfixturevalue("postgres_url"))


ServerFactory = Callable[..., AbstractAsyncContextManager[tuple[Wire, TasksExtension]]]


@pytest.fixture
def serve_inprocess() -> ServerFactory:
    """Start the tasks demo server in this process over HTTP (ASGI); yields a Wire and the extension.

    Keyword arguments are :class:`TaskOptions` fields and ``store_url``; ``tokens=True`` turns on bearer auth
    (the Wire then speaks as alice).
    """

    @asynccontextmanager
    async def start(
        *, tokens: bool = False, clock: Clock | None = None, **option_fields: Any
    ) -> AsyncIterator[tuple[Wire, TasksExtension]]:
        option_fields.setdefault("threshold_s", 0.2)
        option_fields.setdefault("poll_interval_s", 0.05)
        option_fields.setdefault("modes", {"echo": "forbidden", "required_job": "required"})
        option_fields.setdefault("allow_anonymous_tasks", not tokens)
        store_url = option_fields.pop("store_url", "sqlite://")
        options = TaskOptions(**option_fields)
        server, tasks = build_tasks_demo_server(
            options,
            store=store_from_url(store_url, clock=clock),
            base_url=BASE_URL,
            tokens=DEMO_TOKENS if tokens else None,
            clock=clock,
        )
        app = server.streamable_http_app(json_response=True)
        transport = httpx.ASGITransport(app=app)
        async with server.session_manager.run(), httpx.AsyncClient(transport=transport, base_url=BASE_URL) as http:
            yield Wire(http, token="alice-token" if tokens else None), tasks

    return start
