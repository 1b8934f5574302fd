"""The public surface: every module says what it offers in ``__all__``, and the classes a user needs
are importable from their package."""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from types import ModuleType

import pytest

import mcp_approval

#: Modules that import an optional framework (the ``agents`` extra), checked where it is installed.
OPTIONAL = {
    "mcp_approval.agents.pydantic_ai": "pydantic_ai",
    "mcp_approval.agents.langgraph": "langgraph.types",
    "mcp_approval.agents.openai_agents": "agents.tool_context",
    "mcp_approval.agents.google_adk": "google.adk.tools",
}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def _modules() -> list[ModuleType]:
    names = [info.name for info in pkgutil.walk_packages(mcp_approval.__path__, "mcp_approval.")]
    names = [name for name in names if name not in OPTIONAL or _installed(OPTIONAL[name])]
    return [importlib.import_module(name) for name in ["mcp_approval", *names] if name != "mcp_approval.__main__"]


MODULES = _modules()


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_every_module_lists_its_public_names(module: ModuleType) -> None:
    names = getattr(module, "__all__", None)
    assert isinstance(names, list), f"{module.__name__} has no __all__"
    assert len(names) == len(set(names)), f"{module.__name__}.__all__ repeats a name"
    assert not [name for name in names if name.startswith("_")], f"{module.__name__}.__all__ names a private name"


@pytest.mark.parametrize("module", [m for m in MODULES if hasattr(m, "__all__")], ids=lambda m: m.__name__)
def test_every_listed_name_exists(module: ModuleType) -> None:
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert missing == []


@pytest.mark.parametrize(
    ("package", "names"),
    [
        ("mcp_approval.backends", ["LocalApprovalBackend", "ArapBackend"]),
        ("mcp_approval.reviewers", ["reviewer_routes", "console_routes", "reviewer_surface"]),
        ("mcp_approval.tasks", ["RedisTaskStore", "SqlTaskStore", "TasksExtension", "TaskOptions"]),
        ("mcp_approval.server", ["Approvals", "JwtTokenVerifier", "StaticTokenVerifier"]),
        ("mcp_approval.policy", ["CedarPDP", "HttpPDP", "PolicyDecisionPoint"]),
        ("mcp_approval.client", ["TasksClient", "read_disposition"]),
        ("mcp_approval", ["Approvals", "CedarPDP", "LocalApprovalBackend", "ArapBackend", "JwtTokenVerifier"]),
    ],
)
def test_the_classes_a_user_needs_come_from_their_package(package: str, names: list[str]) -> None:
    module = importlib.import_module(package)
    for name in names:
        assert name in module.__all__
        defined = getattr(module, name)
        assert defined.__module__.startswith(package), f"{package}.{name} is {defined.__module__}.{name}"


def test_an_unknown_name_of_a_lazy_package_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Approvalz'"):
        _ = mcp_approval.Approvalz  # type: ignore[attr-defined]
    tasks = importlib.import_module("mcp_approval.tasks")
    with pytest.raises(AttributeError, match="no attribute 'RedisStore'"):
        _ = tasks.RedisStore


def test_names_that_moved_to_the_reviewer_surface_still_import_from_backends_with_a_warning() -> None:
    backends = importlib.import_module("mcp_approval.backends")
    reviewers = importlib.import_module("mcp_approval.reviewers")
    for name in ("console_routes", "reviewer_routes", "Authenticator"):
        with pytest.warns(DeprecationWarning, match=f"import {name} from mcp_approval.reviewers"):
            moved = getattr(backends, name)
        assert moved is getattr(reviewers, name)
        assert name not in backends.__all__


def test_the_principal_lookup_has_one_definition_and_one_name() -> None:
    approval = importlib.import_module("mcp_approval.approval")
    tasks_options = importlib.import_module("mcp_approval.tasks.options")
    assert approval.PrincipalLookup is tasks_options.PrincipalLookup
    for module in (approval, tasks_options):
        assert not hasattr(module, "PrincipalResolver")
