"""Durable approval-workflow state: submission intents, workflows, the execution claim.

:class:`ApprovalStore` is the whole store, built once by the composition root; each collaborator
is handed the part it uses, every part a :class:`~.core.StoreCore` over the same database:

==========================  ============================================  ===========================
part                        its transactions                              used by
==========================  ============================================  ===========================
:class:`~.admission.        admission, the intent, its handle, the new    task creation
AdmissionStore`             task (or all of it at once)
:class:`~.retries.          the owed outcome a retry without tasks        the answers to clients
RetryStore`                 takes, once                                   without tasks
:class:`~.leases.           leases, the next look, chained generations    the workflow driver
LeaseStore`
:class:`~.endings.          the execution claim, the fence, the finish    the driver and the executor
EndingStore`
:class:`~.recovery.         creations in flight, orphans, retention       reconciliation
RecoveryStore`
==========================  ============================================  ===========================

Every part reads a workflow, an intent or a call's dedup scope (:class:`~.core.StoreCore`). Each
operation is one transaction; the task row is written through the tasks layer's
:class:`~mcp_approval.tasks.sql_store.TaskRows`, never directly.
"""

from __future__ import annotations

from mcp_approval.approval.persistence.admission import AdmissionStore
from mcp_approval.approval.persistence.endings import EndingStore
from mcp_approval.approval.persistence.leases import LeaseStore
from mcp_approval.approval.persistence.records import (
    APPROVAL_HANDLER,
    Admission,
    DueCheck,
    Intent,
    NewWorkflow,
    Reschedule,
    TaskOutcome,
    Workflow,
)
from mcp_approval.approval.persistence.recovery import RecoveryStore
from mcp_approval.approval.persistence.retries import RetryStore

__all__ = [
    "APPROVAL_HANDLER",
    "Admission",
    "ApprovalStore",
    "DriverStore",
    "DueCheck",
    "Intent",
    "NewWorkflow",
    "Reschedule",
    "TaskOutcome",
    "Workflow",
]


class DriverStore(LeaseStore, EndingStore, RecoveryStore):
    """The workflow driver's part: its leases and the endings it writes, and recovery."""


class ApprovalStore(AdmissionStore, RetryStore, DriverStore):
    """The approval workflow tables, on the task store's database: every part above, for the composition root.

    Built with :class:`~.core.StoreCore`'s arguments (the database, the result retention, the
    clock, the audit log, the task rows and the change signal).
    """
