"""libpq parameters in a PostgreSQL store URL: translated for asyncpg, or refused in one line naming them.

Unit tests of the translation, a real connection to the local PostgreSQL through a URL carrying
``sslmode`` and friends, and ``serve`` / ``review`` subprocesses refusing a parameter with exit 3.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import Connection, text
from sqlalchemy.engine import make_url

from mcp_approval.storage import normalize_url, open_database
from mcp_approval.storage.postgres_url import StoreURLError, asyncpg_target, shown_url
from tests.support.arap import arap_deployment
from tests.support.timing import scaled
from tests.support.treasury import deployment_dir

BASE = "postgresql://mcp:s3cret-pw@db.example:5432/mcp"


def test_parameters_asyncpg_reads_stay_in_its_dsn() -> None:
    url = f"{BASE}?sslmode=verify-full&sslrootcert=/etc/ca.pem&sslcert=/etc/c.pem&sslkey=/etc/k.pem"
    target = asyncpg_target(url + "&target_session_attrs=read-write&application_name=treasury")
    dsn = make_url(target.dsn)
    assert dsn.render_as_string(hide_password=False).startswith(f"{BASE}?")
    assert dict(dsn.query) == {
        "sslmode": "verify-full",
        "sslrootcert": "/etc/ca.pem",
        "sslcert": "/etc/c.pem",
        "sslkey": "/etc/k.pem",
        "target_session_attrs": "read-write",
        "application_name": "treasury",
    }
    assert target.timeout_s is None


def test_postgres_scheme_and_driver_name_become_a_plain_dsn() -> None:
    assert asyncpg_target("postgres://h/d").dsn == "postgresql://h/d"
    assert asyncpg_target("postgresql+asyncpg://h/d?sslmode=require").dsn == "postgresql://h/d?sslmode=require"


@pytest.mark.parametrize(("given", "seconds"), [("10", 10.0), ("1", 2.0), ("0", None)])
def test_connect_timeout_becomes_the_connect_timeout(given: str, seconds: float | None) -> None:
    target = asyncpg_target(f"{BASE}?connect_timeout={given}&sslmode=require")
    assert (target.dsn, target.timeout_s) == (f"{BASE}?sslmode=require", seconds)


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ("keepalives=1", "the URL parameter 'keepalives' is not supported by the PostgreSQL driver (supported: "),
        ("sslmode=required", "the URL parameter 'sslmode' must be one of disable, allow, prefer, require, "),
        ("target_session_attrs=master", "the URL parameter 'target_session_attrs' must be one of any, primary, "),
        ("connect_timeout=ten", "the URL parameter 'connect_timeout' must be whole seconds, not 'ten'"),
        ("connect_timeout=-1", "the URL parameter 'connect_timeout' must not be negative, not '-1'"),
        ("sslmode=require&sslmode=disable", "the URL parameter 'sslmode' is given more than once"),
    ],
)
def test_a_parameter_the_driver_cannot_use_is_refused_naming_it(query: str, reason: str) -> None:
    with pytest.raises(StoreURLError) as refused:
        normalize_url(f"{BASE}?{query}")
    message = str(refused.value)
    assert message.startswith(f"cannot open the store postgresql://mcp:***@db.example:5432/mcp?{query}: {reason}")
    assert "\n" not in message
    assert "s3cret-pw" not in message


def test_a_shown_url_masks_the_password_and_the_key_password() -> None:
    shown = shown_url(f"{BASE}?sslpassword=key-pw&sslkey=/etc/k.pem")
    assert shown == "postgresql://mcp:***@db.example:5432/mcp?sslpassword=***&sslkey=/etc/k.pem"


@pytest.mark.postgres
@pytest.mark.anyio
@pytest.mark.parametrize("sslmode", ["disable", "prefer"])
async def test_the_local_postgres_is_reached_through_a_libpq_url(postgres_url: str, sslmode: str) -> None:
    database = open_database(f"{postgres_url}?sslmode={sslmode}&connect_timeout=5&application_name=mcpa-test")

    def application_name(conn: Connection) -> str:
        return str(conn.execute(text("SELECT current_setting('application_name')")).scalar_one())

    try:
        assert await database.read(application_name) == "mcpa-test"
        assert await database.write(application_name) == "mcpa-test"
    finally:
        await database.close()


UNSUPPORTED = "postgresql://treasury:s3cret-pw@127.0.0.1:1/treasury?sslmode=require&keepalives=1"
SHOWN = "postgresql://treasury:***@127.0.0.1:1/treasury?sslmode=require&keepalives=1"
REASON = "the URL parameter 'keepalives' is not supported by the PostgreSQL driver"


def _run(*arguments: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "mcp_approval", *arguments]
    return subprocess.run(command, capture_output=True, text=True, timeout=scaled(60), env=os.environ.copy())


def _assert_one_line(done: subprocess.CompletedProcess[str], prefix: str) -> None:
    output = done.stdout + done.stderr
    assert done.returncode == 3, output
    assert "s3cret-pw" not in output
    assert done.stdout == ""
    assert done.stderr.strip().splitlines() == [done.stderr.strip()], output
    assert done.stderr.startswith(f"{prefix}cannot open the store {SHOWN}: {REASON} (supported: "), output


def test_serve_refuses_an_unsupported_parameter_in_one_line(tmp_path: Path) -> None:
    config = deployment_dir(tmp_path) / "config.toml"
    done = _run("serve", "--config", str(config), "--port", "0", "--db", UNSUPPORTED)
    _assert_one_line(done, "mcp-approval serve: ")


def test_review_refuses_an_unsupported_parameter_in_one_line() -> None:
    _assert_one_line(_run("review", "list", "--db", UNSUPPORTED), "error: ")


def test_arap_server_refuses_an_unsupported_parameter_in_one_line(tmp_path: Path) -> None:
    config = arap_deployment(tmp_path).directory / "arap-server.toml"
    done = _run("arap-server", "--config", str(config), "--port", "0", "--db", UNSUPPORTED)
    # arap-server may warn about its dev mode first.
    done.stderr = "\n".join(line for line in done.stderr.splitlines() if "WARNING" not in line)
    _assert_one_line(done, "mcp-approval arap-server: ")
