"""The tasks layer's tables, and its migration history (revisions in ``schema_versions/``).

Times are integer milliseconds since the Unix epoch; JSON documents are stored as text that
this project serializes itself, so both databases keep byte-identical values. The table objects
here describe the head revision for queries; the revisions spell out their own DDL.
"""

from pathlib import Path

from sqlalchemy import BigInteger, Boolean, Column, Index, Integer, MetaData, String, Table, Text, text

from mcp_approval.storage.counts import counts_table
from mcp_approval.storage.migrations import Migrations

__all__ = [
    "SIGNAL_PENDING",
    "TASKS_MIGRATIONS",
    "metadata",
    "task_counts_table",
    "task_workers_table",
    "tasks_table",
]

#: The tasks table's history; databases of the single-history releases had it from version 1.
TASKS_MIGRATIONS = Migrations(
    "tasks", Path(__file__).with_name("schema_versions"), legacy=((1, "tasks_0001"), (2, "tasks_0002"))
)

metadata = MetaData()

tasks_table = Table(
    "tasks",
    metadata,
    Column("task_id", String(64), primary_key=True),
    # SHA-256 hex digest of the owning principal; NULL for an anonymous (bearer-capability) task.
    Column("principal_digest", String(64), nullable=True),
    Column("tool_name", String(256), nullable=False),
    Column("status", String(16), nullable=False),
    Column("status_message", Text, nullable=True),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    Column("ttl_ms", BigInteger, nullable=True),
    # created_at + ttl_ms, kept beside it so the sweeper's query is one indexed range.
    Column("expires_at", BigInteger, nullable=True),
    Column("poll_interval_ms", BigInteger, nullable=True),
    Column("result_json", Text, nullable=True),
    Column("error_json", Text, nullable=True),
    # Outstanding input requests: {key: {method, params}}.
    Column("input_requests_json", Text, nullable=False, default="{}"),
    # Answers received through tasks/update and not yet taken by the owning worker.
    Column("input_responses_json", Text, nullable=False, default="{}"),
    # Input keys are numbered per task and never reused.
    Column("input_seq", Integer, nullable=False, default=0),
    Column("cancel_requested", Boolean, nullable=False, default=False),
    # The worker running the task; NULL when nothing runs it.
    Column("owner", String(64), nullable=True),
    # The task's own lease. Since tasks_0003 it covers a new task only until its owner's first
    # renewal of its worker lease (task_workers), which then clears it; rows of an older worker
    # that renews per task keep it.
    Column("lease_expires_at", BigInteger, nullable=True),
    # Bumped by every write; read-modify-write operations compare-and-set on it.
    Column("version", Integer, nullable=False, default=0),
    # Added by revision tasks_0002. The component that drives a task no in-process execution runs
    # (e.g. "approval"), and the _meta every tasks/get repeats while the task is not terminal.
    Column("handler", String(32), nullable=True),
    Column("meta_json", Text, nullable=True),
)

Index("ix_tasks_principal_status", tasks_table.c.principal_digest, tasks_table.c.status)
Index("ix_tasks_status", tasks_table.c.status)
Index("ix_tasks_expires_at", tasks_table.c.expires_at)
Index("ix_tasks_lease", tasks_table.c.lease_expires_at)
# Added by revision tasks_0003 (replacing ix_tasks_owner): a worker's tasks whose own lease is not
# handed over yet are one range of this index.
Index("ix_tasks_owner_lease", tasks_table.c.owner, tasks_table.c.lease_expires_at)

#: The condition of a task with a signal its owner has not acted on (a cancel request, answers
#: not taken). Spelled as literal SQL so a query repeating it matches the partial index below.
SIGNAL_PENDING = text("cancel_requested OR input_responses_json <> '{}'")
# A worker's pending signals are read through this index: it holds only the signalled rows.
Index("ix_tasks_owner_signals", tasks_table.c.owner, postgresql_where=SIGNAL_PENDING, sqlite_where=SIGNAL_PENDING)

#: One lease per worker (tasks_0003): a worker renews it once per interval however many tasks it
#: holds, and its tasks count as lapsed once it expires.
task_workers_table = Table(
    "task_workers",
    metadata,
    Column("worker_id", String(64), primary_key=True),
    Column("lease_expires_at", BigInteger, nullable=False),
)

Index("ix_task_workers_lease", task_workers_table.c.lease_expires_at)

#: The number of unfinished tasks, in all (scope ``"tasks"``) and per principal (``"tasks:<digest>"``),
#: kept by the triggers of revision tasks_0004 (see :mod:`mcp_approval.storage.counts`).
task_counts_table = counts_table("task_counts", metadata)
