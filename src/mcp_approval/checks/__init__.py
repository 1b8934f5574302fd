"""``mcp-approval check``: black-box conformance scenarios for any MCP server that gates tool calls.

The kit speaks to a server only over Streamable HTTP, as two principals, and decides approval
requests out of band (a command the operator names, or this project's ``mcp-approval review``);
for a server bound to an ARAP backend it can also be the Access Request Service the server
submits to (:mod:`mcp_approval.checks.ars`). It never harms the server it checks: it stops
calling the gated tool once it sees it run without approval, and it cancels or denies whatever it
left pending. Each scenario names the SEP statements it checks, with the ids of ``conformance/*.yaml``.

Public: :class:`CheckOptions`, :class:`CheckInputError`, :func:`run_checks`, :class:`CheckResult`,
:class:`RunSummary`, :data:`SCENARIOS` and :func:`report_json`, imported on first access (so the
raw wire, :mod:`mcp_approval.checks.wire`, which the project's tests speak through, loads alone).
"""

from typing import TYPE_CHECKING

from mcp_approval._lazy import lazy_getattr

if TYPE_CHECKING:
    from mcp_approval.checks.options import CheckInputError, CheckOptions
    from mcp_approval.checks.report import CheckResult, RunSummary, report_json
    from mcp_approval.checks.runner import run_checks
    from mcp_approval.checks.scenarios import SCENARIOS

__all__ = ["SCENARIOS", "CheckInputError", "CheckOptions", "CheckResult", "RunSummary", "report_json", "run_checks"]

__getattr__ = lazy_getattr(
    __name__,
    {
        "CheckInputError": "mcp_approval.checks.options",
        "CheckOptions": "mcp_approval.checks.options",
        "CheckResult": "mcp_approval.checks.report",
        "RunSummary": "mcp_approval.checks.report",
        "report_json": "mcp_approval.checks.report",
        "run_checks": "mcp_approval.checks.runner",
        "SCENARIOS": "mcp_approval.checks.scenarios",
    },
)
