"""mcp-approval: durable MCP tasks, structured authorization denials and approval-gated tool calls.

The package is layered; each subpackage depends only on the ones below it:

- :mod:`mcp_approval.storage` - database engines, schema and migrations.
- :mod:`mcp_approval.tasks` - the SEP-2663 tasks runtime (server extension, store contract).
- :mod:`mcp_approval.web` - the HTTP guards every server shares (failed sign-ins, forwarded
  addresses, request bodies).
- :mod:`mcp_approval.denials` - SEP-2643 structured authorization denials.
- :mod:`mcp_approval.policy` - AuthZEN models, the Cedar and HTTP PDPs, the tool-call mapping.
- :mod:`mcp_approval.backends` - approval backends (local, ARAP), automatic resolvers, callback signing.
- :mod:`mcp_approval.approval` - the SEP-2848 policy enforcement point and the approval workflow.
- :mod:`mcp_approval.reviewers` - the reviewer surface: the reviewer API and the console.
- :mod:`mcp_approval.notify`, :mod:`mcp_approval.metrics` - notifications and the Prometheus endpoint.
- :mod:`mcp_approval.client` - the agent side (tasks-aware tool calls).
- :mod:`mcp_approval.server` - the composition: :class:`Approvals` for your own ``MCPServer``, and the
  deployment file mapping ``mcp-approval serve`` uses.
- :mod:`mcp_approval.cli` - the ``mcp-approval`` command.
- :mod:`mcp_approval.testing` - fixture servers for the conformance suite and the tasks demo.

``tests/test_import_graph.py`` holds these layers as a table and fails on an import against them.

Each subpackage's ``__all__`` is its public surface; a module's ``__all__`` is what it offers to
the rest of the package. The names most programs start from are also importable from here,
loaded on first access so that ``import mcp_approval`` stays cheap. Every exception the package
raises on purpose derives from :class:`MCPApprovalError` (``mcp_approval.errors``).
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp_approval.backends import ArapBackend, LocalApprovalBackend
    from mcp_approval.client import TasksClient
    from mcp_approval.errors import MCPApprovalError
    from mcp_approval.policy import CedarPDP, HttpPDP, PolicyDecisionPoint
    from mcp_approval.server import Approvals, JwtTokenVerifier, StaticTokenVerifier

# Name -> the subpackage (or module) that defines it.
_LAZY = {
    "Approvals": "mcp_approval.server",
    "ArapBackend": "mcp_approval.backends",
    "CedarPDP": "mcp_approval.policy",
    "HttpPDP": "mcp_approval.policy",
    "JwtTokenVerifier": "mcp_approval.server",
    "LocalApprovalBackend": "mcp_approval.backends",
    "MCPApprovalError": "mcp_approval.errors",
    "PolicyDecisionPoint": "mcp_approval.policy",
    "StaticTokenVerifier": "mcp_approval.server",
    "TasksClient": "mcp_approval.client",
}

__all__ = [
    "Approvals",
    "ArapBackend",
    "CedarPDP",
    "HttpPDP",
    "JwtTokenVerifier",
    "LocalApprovalBackend",
    "MCPApprovalError",
    "PolicyDecisionPoint",
    "StaticTokenVerifier",
    "TasksClient",
]


def __getattr__(name: str) -> Any:
    """Import a name of ``__all__`` from its subpackage on first access; ``__version__`` likewise.

    (Not :func:`mcp_approval._lazy.lazy_getattr`: ``import mcp_approval`` loads no other module.)
    """
    module = _LAZY.get(name)
    if name == "__version__":
        value = _installed_version()
    elif module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    else:
        value = getattr(import_module(module), name)
    globals()[name] = value  # later accesses skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, "__version__"})


def _installed_version() -> str:
    # pyproject.toml's [project] version, the one place it is written, as pip recorded it.
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mcp-approval")
    except PackageNotFoundError:
        return "0+unknown"  # a source tree on the path, never installed
