"""The ``[console.oidc]`` configuration in docs/reviewers.md works as printed, a bad one is refused
naming the file and the field, and the phone screenshots the page shows exist."""

from __future__ import annotations

import asyncio
import re
import tomllib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.routing import Route

from mcp_approval.config import ConfigError, load_config
from mcp_approval.server.deployment import build_deployment
from tests.support.polling import eventually
from tests.support.timing import scaled
from tests.support.treasury import deployment_dir, to_toml

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGE = DOCS / "reviewers.md"
_BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)
TITLE = "## Signing in with the organization's identity provider"


def documented() -> dict[str, Any]:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(TITLE)
    section = text[start : text.find("\n## ", start + 1)]
    (block,) = [code for language, code in _BLOCK.findall(section) if language == "toml"]
    return tomllib.loads(block)


def deployment(tmp_path: Path, oidc: dict[str, Any], *, dev_mode: bool = True, secret: str = "s3cret\n") -> Path:
    directory = deployment_dir(tmp_path, {"console": {"oidc": oidc}, "server": {"dev_mode": dev_mode}})
    if not dev_mode:  # static tokens are for dev mode: the principals keep their roles only
        config = tomllib.loads((directory / "config.toml").read_text())
        config["principals"] = [{"id": entry["id"], "roles": entry["roles"]} for entry in config["principals"]]
        (directory / "config.toml").write_text(to_toml(config))
    (directory / "console-client-secret").write_text(secret)
    (directory / "console-client-secret").chmod(0o600)
    return directory / "config.toml"


def test_the_documented_configuration_mounts_the_sign_in(tmp_path: Path) -> None:
    oidc = documented()["console"]["oidc"]
    config = load_config(deployment(tmp_path, oidc))
    assert config.console.oidc is not None
    assert config.console.oidc.roles_claim == "roles"
    deployment_ = build_deployment(config, base_url="http://127.0.0.1:1")
    paths = {route.path for route in deployment_.approvals.routes() if isinstance(route, Route)}
    assert {"/console/oidc/start", "/console/oidc/callback", "/console/find"} <= paths
    assert "/console/oidc/callback" in deployment_.approvals.openapi()["paths"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"issuer": "http://login.example.com"}, "console.oidc.issuer"),
        ({"redirect_url": "https://approvals.example.com/elsewhere"}, "console.oidc.redirect_url"),
        ({"algorithms": ["HS256"]}, "console.oidc.algorithms"),
        ({"client_id": ""}, "console.oidc.client_id"),
        ({"roles_clam": "roles"}, "console.oidc.roles_clam"),
    ],
)
def test_a_bad_setting_is_refused_naming_the_file_and_the_field(
    tmp_path: Path, change: dict[str, Any], field: str
) -> None:
    path = deployment(tmp_path, {**documented()["console"]["oidc"], **change})
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    assert str(refused.value).startswith(str(path.name)) or str(path) in str(refused.value)
    assert field in str(refused.value)


def test_loopback_http_is_for_dev_mode_only(tmp_path: Path) -> None:
    oidc = {
        **documented()["console"]["oidc"],
        "issuer": "http://127.0.0.1:9/",
        "redirect_url": "http://127.0.0.1:8/console/oidc/callback",
    }
    assert load_config(deployment(tmp_path / "dev", oidc)).console.oidc is not None
    with pytest.raises(ConfigError, match=r"console\.oidc\.issuer: 'http://127\.0\.0\.1:9/' must be an https URL"):
        load_config(deployment(tmp_path / "prod", oidc, dev_mode=False))


def test_an_empty_secret_file_is_refused_naming_the_field(tmp_path: Path) -> None:
    config = load_config(deployment(tmp_path, documented()["console"]["oidc"], secret="\n"))
    with pytest.raises(ConfigError, match=r"console\.oidc\.client_secret_file: .* is empty"):
        build_deployment(config, base_url="http://127.0.0.1:1")


def test_the_phone_screenshots_the_page_shows_exist() -> None:
    shown = re.findall(r'src="(img/phone-[a-z-]+\.png)"', PAGE.read_text(encoding="utf-8"))
    assert len(shown) == 3
    for name in shown:
        assert (DOCS / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name


@pytest.fixture
async def production_console(tmp_path: Path) -> AsyncIterator[str]:
    """The documented sign-in on a deployment outside dev mode (no static tokens, no ``[auth]``),
    its routes served on 127.0.0.1."""
    oidc = {**documented()["console"]["oidc"], "redirect_url": "https://approvals.example.com/console/oidc/callback"}
    config = load_config(deployment(tmp_path, oidc, dev_mode=False))
    built = build_deployment(config, base_url="https://approvals.example.com")
    app = Starlette(routes=built.approvals.routes())
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off"))
    serving = asyncio.create_task(server.serve())
    try:
        await eventually(lambda: _started(server, serving), bool, timeout_s=scaled(10))
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        await serving


async def _started(server: uvicorn.Server, serving: asyncio.Task[None]) -> bool:
    if serving.done():
        serving.result()
    return server.started


@pytest.mark.anyio
async def test_outside_dev_mode_the_console_takes_the_provider_only(production_console: str) -> None:
    async with httpx.AsyncClient(base_url=production_console, timeout=scaled(20)) as http:
        page = await http.get("/console/login")
        assert page.status_code == 200
        assert 'id="oidc-sign-in"' in page.text
        assert 'name="token"' not in page.text  # no bearer-token form
        refused = await http.post("/console/login", data={"token": "carol-token"})
        assert refused.status_code == 403
        assert "Sign in with the identity provider" in refused.text
        assert (await http.get("/approvals", headers={"authorization": "Bearer carol-token"})).status_code == 401
        to_sign_in = await http.get("/console/requests/apr_x")
        assert to_sign_in.headers["location"] == "/console/login?next=/console/requests/apr_x"
