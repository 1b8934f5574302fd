"""``mcp-approval check``: black-box conformance scenarios for any MCP server that gates tool calls.

The kit speaks to a server only over Streamable HTTP, as two principals, and decides approval
requests out of band (a command the operator names, or this project's ``mcp-approval review``);
for a server bound to an ARAP backend it can also be the Access Request Service the server
submits to (:mod:`mcp_approval.checks.ars`).
Each scenario names the SEP statement it checks, with the same ids as ``conformance/*.yaml``.

Public: :class:`CheckOptions`, :class:`CheckInputError`, :func:`run_checks`, :class:`ScenarioResult`,
:data:`SCENARIOS` (id → statement) and :func:`report_json`.
"""

from mcp_approval.checks.options import CheckInputError, CheckOptions
from mcp_approval.checks.report import ScenarioResult, report_json
from mcp_approval.checks.runner import run_checks
from mcp_approval.checks.scenarios import SCENARIOS

__all__ = ["SCENARIOS", "CheckInputError", "CheckOptions", "ScenarioResult", "report_json", "run_checks"]
