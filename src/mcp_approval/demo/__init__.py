"""``mcp-approval demo``: every approval path of the treasury deployment, driven by a real MCP client over HTTP.

The demo copies its deployment (``demo/treasury``: the treasury example plus a short-deadline
rule) into a temporary folder, starts ``mcp-approval serve`` on it (SQLite there, or ``--db``)
and the servers the selected scenarios need as subprocesses on free loopback ports, runs the
scenarios in order, and kills every subprocess when it ends, fails or is interrupted. With a
PostgreSQL ``--db``, every server works in a schema of the run's own, dropped at the end
(:mod:`mcp_approval.demo.stores`).

``--json`` prints only the results: a list with one object per scenario, keys in this order:
``scenario`` (int), ``name`` (str), ``outcome`` (``"pass"`` | ``"fail"``), ``disposition`` (str
or null), ``executions`` (int, from the ledger file), ``detail`` (str), ``seconds`` (float).
"""

from mcp_approval.demo.runner import DemoOptions, parse_only, run_demo

__all__ = ["DemoOptions", "parse_only", "run_demo"]
