"""``TaskOptions`` and ``ApprovalOptions`` as the product page states them: defaults, ``approval_url``'s rules."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from mcp_approval.approval.options import ApprovalOptions
from mcp_approval.client import TasksClient
from mcp_approval.config import ConfigError, load_config
from mcp_approval.server.deployment import build_deployment
from mcp_approval.tasks import TaskOptions, TasksExtension
from tests.support.treasury import deployment_dir


def test_defaults_match_the_product_page() -> None:
    options = TaskOptions()
    stated = {
        "threshold_s": 5.0,
        "ttl_s": 3600,
        "poll_interval_s": 2.0,
        "max_tasks": 10_000,
        "max_per_principal": 100,
    }
    assert {name: getattr(options, name) for name in stated} == stated
    assert ApprovalOptions().approval_url is None
    assert TaskOptions(threshold_s=None).threshold_s is None  # only required tools and approvals become tasks


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        ("http://reviews.example.test/approvals/{approval_id}", "http is allowed only on a loopback host"),
        ("http://10.0.0.8/approvals/{approval_id}", "http is allowed only on a loopback host"),
        ("https://reviews.example.test/approvals/", "must contain {approval_id}"),
        ("https://reviews.example.test/approvals/{id}", "must contain {approval_id}"),
        ("ftp://reviews.example.test/{approval_id}", "absolute https URL"),
        ("/approvals/{approval_id}", "absolute https URL"),
        ("reviews.example.test/{approval_id}", "absolute https URL"),
        ("", "must be a URL string"),
        ("https://user:secret@reviews.example.test/{approval_id}", "user name or password"),
        ("https://{approval_id}.reviews.example.test/", "may not be part of the host"),
        ("https://[::1/{approval_id}", "not a valid URL"),
    ],
)
def test_a_bad_approval_url_is_refused_naming_the_field(url: str, complaint: str) -> None:
    with pytest.raises(ValueError, match=r"approval_url") as refused:
        ApprovalOptions(approval_url=url)
    assert complaint in str(refused.value)


@pytest.mark.parametrize(
    "url",
    [
        "https://reviews.example.test/approvals/{approval_id}",
        "https://reviews.example.test/decide?id={approval_id}&from=mcp",
        "http://127.0.0.1:8000/approvals/{approval_id}",
        "http://localhost/approvals/{approval_id}",
        "http://[::1]:9000/approvals/{approval_id}",
    ],
)
def test_https_and_loopback_http_pages_are_accepted(url: str) -> None:
    assert ApprovalOptions(approval_url=url).approval_url == url


def test_the_link_fills_in_the_id_percent_encoded() -> None:
    options = ApprovalOptions(approval_url="https://r.example.test/a/{approval_id}?again={approval_id}")
    assert options.approval_link("apr_x1") == "https://r.example.test/a/apr_x1?again=apr_x1"
    assert options.approval_link("a/b?c") == "https://r.example.test/a/a%2Fb%3Fc?again=a%2Fb%3Fc"
    assert ApprovalOptions().approval_link("apr_x1") is None


def test_the_deployment_file_takes_approval_url_and_wires_it(tmp_path: Path) -> None:
    url = "https://reviews.example.test/approvals/{approval_id}"
    directory = deployment_dir(tmp_path, {"tasks": {"approval_url": url}})
    config = load_config(directory / "config.toml")
    assert config.tasks.approval_url == url
    deployment = build_deployment(config, base_url="http://127.0.0.1:8000")
    assert deployment.approval.options.approval_url == url
    assert load_config(deployment_dir(tmp_path / "plain") / "config.toml").tasks.approval_url is None


def test_the_approval_section_takes_approval_url(tmp_path: Path) -> None:
    url = "https://reviews.example.test/approvals/{approval_id}"
    directory = deployment_dir(tmp_path, {"approval": {"approval_url": url}})
    deployment = build_deployment(load_config(directory / "config.toml"), base_url="http://127.0.0.1:8000")
    assert deployment.approval.options.approval_url == url


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        ("http://reviews.example.test/{approval_id}", "http is allowed only on a loopback host"),
        ("https://reviews.example.test/approvals", "must contain {approval_id}"),
    ],
)
def test_a_bad_approval_url_in_the_file_names_file_and_field(tmp_path: Path, url: str, complaint: str) -> None:
    directory = deployment_dir(tmp_path, {"tasks": {"approval_url": url}})
    with pytest.raises(ConfigError) as refused:
        load_config(directory / "config.toml")
    message = str(refused.value)
    assert "config.toml" in message
    assert "tasks.approval_url" in message
    assert complaint in message


def test_every_option_the_page_names_exists() -> None:
    assert {"threshold_s", "ttl_s", "poll_interval_s", "max_tasks", "max_per_principal"} <= set(
        TaskOptions.model_fields
    )
    assert "approval_url" in ApprovalOptions.model_fields
    assert "store" in inspect.signature(TasksExtension).parameters


def test_the_client_waits_30_s_for_a_task_by_default() -> None:
    """Remote task → Imported tool: "still open after task_wait_s (default 30)"."""
    assert TasksClient().task_wait_s == 30.0
