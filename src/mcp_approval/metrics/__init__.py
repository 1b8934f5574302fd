"""A Prometheus endpoint for operators: approvals waiting, decisions, executions, store errors.

Off by default (:class:`MetricsOptions`, ``[metrics]`` in a deployment file); when on, served at
``path`` on the HTTP app and only to a scraper presenting ``bearer_token``. The numbers come from
the store, so every worker of a deployment reports the same totals (scrape one, or aggregate
with ``max``), except ``mcp_approval_store_errors_total`` and the anchor alerts, which count this process's:

- ``mcp_approval_pending_approvals{template}``: calls waiting for approval (or for their
  execution once approved), counted at each scrape;
- ``mcp_approval_decisions_total{outcome}``: requests of the local backend that ended
  ``approved``, ``denied``, ``expired`` or ``cancelled``;
- ``mcp_approval_time_to_decision_seconds``: from submission to approval or denial;
- ``mcp_approval_reviewer_decisions_total{reviewer,decision}``: decisions people recorded;
- ``mcp_approval_similar_rule_decisions_total{rule,author}``: requests each similar-call rule approved;
- ``mcp_approval_executions_total{disposition}``: approval tasks that ended, by disposition;
- ``mcp_approval_notification_deliveries_total{channel}``: notifications a channel accepted;
- ``mcp_approval_notification_failures_total{channel}``: attempts a channel did not accept (each is retried);
- ``mcp_approval_store_errors_total``: store operations that failed (database unreachable);
- ``mcp_approval_audit_anchor_alerts_total{problem}``: audit anchor alerts this process raised
  (``chain``: the chain no longer holds the previous anchor, so none was written; ``history``).

The notification counters are read from the channels' delivery cursors, the other counters and
the histogram from the audit log: each scrape reads the events appended since the previous one,
so their values only grow, and a restarted process counts the whole history again before answering.

Modules: ``options`` (:class:`MetricsOptions`, read by the configuration without loading
Prometheus or the store) and ``endpoint`` (the metrics and their route).
"""

from typing import TYPE_CHECKING

from mcp_approval._lazy import lazy_getattr

if TYPE_CHECKING:
    from mcp_approval.metrics.endpoint import ApprovalMetrics, metrics_paths, metrics_route
    from mcp_approval.metrics.options import MetricsOptions

# Name -> the module that defines it, imported on first access (the options alone load no Prometheus).
_LAZY = {
    "ApprovalMetrics": "mcp_approval.metrics.endpoint",
    "MetricsOptions": "mcp_approval.metrics.options",
    "metrics_paths": "mcp_approval.metrics.endpoint",
    "metrics_route": "mcp_approval.metrics.endpoint",
}

__all__ = ["ApprovalMetrics", "MetricsOptions", "metrics_paths", "metrics_route"]

__getattr__ = lazy_getattr(__name__, _LAZY)
