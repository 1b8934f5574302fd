"""The SEP-2663 tasks runtime: server extension, store contract and the tool-side API.

Typical use::

    from mcp.server.mcpserver import MCPServer
    from mcp_approval.tasks import SqlTaskStore, TaskOptions, TasksExtension, task_routing_middleware

    tasks = TasksExtension(TaskOptions(threshold_s=1.0), store=SqlTaskStore("sqlite:///tasks.db"))
    server = MCPServer("demo", extensions=[tasks], lifespan=tasks.lifespan,
                       middleware=[task_routing_middleware])

Several workers share task state through :class:`RedisTaskStore` (the ``mcp-approval[redis]``
extra; imported on first access, so a plain install never loads ``redis``).
"""

from typing import TYPE_CHECKING

from mcp_approval._lazy import lazy_getattr

if TYPE_CHECKING:
    from mcp_approval.tasks.execution import Execution, current_task
    from mcp_approval.tasks.middleware import task_routing_middleware
    from mcp_approval.tasks.models import TaskRecord
    from mcp_approval.tasks.options import TaskMode, TaskOptions
    from mcp_approval.tasks.redis_store import RedisTaskStore
    from mcp_approval.tasks.schema import TASKS_MIGRATIONS
    from mcp_approval.tasks.server import TasksExtension
    from mcp_approval.tasks.signals import TaskChange, TaskSignals
    from mcp_approval.tasks.sql_store import SqlTaskStore
    from mcp_approval.tasks.states import TaskStatus
    from mcp_approval.tasks.store import NewTask, TaskSignal, TaskStore
    from mcp_approval.tasks.store_url import store_from_url

# Name -> the module that defines it, imported on first access (a client reading task models
# loads neither the runtime nor SQLAlchemy; a plain install never loads ``redis``).
_LAZY = {
    "TASKS_MIGRATIONS": "mcp_approval.tasks.schema",
    "Execution": "mcp_approval.tasks.execution",
    "NewTask": "mcp_approval.tasks.store",
    "RedisTaskStore": "mcp_approval.tasks.redis_store",
    "SqlTaskStore": "mcp_approval.tasks.sql_store",
    "TaskChange": "mcp_approval.tasks.signals",
    "TaskMode": "mcp_approval.tasks.options",
    "TaskOptions": "mcp_approval.tasks.options",
    "TaskRecord": "mcp_approval.tasks.models",
    "TaskSignal": "mcp_approval.tasks.store",
    "TaskSignals": "mcp_approval.tasks.signals",
    "TaskStatus": "mcp_approval.tasks.states",
    "TaskStore": "mcp_approval.tasks.store",
    "TasksExtension": "mcp_approval.tasks.server",
    "current_task": "mcp_approval.tasks.execution",
    "store_from_url": "mcp_approval.tasks.store_url",
    "task_routing_middleware": "mcp_approval.tasks.middleware",
}

__all__ = [
    "TASKS_MIGRATIONS",
    "Execution",
    "NewTask",
    "RedisTaskStore",
    "SqlTaskStore",
    "TaskChange",
    "TaskMode",
    "TaskOptions",
    "TaskRecord",
    "TaskSignal",
    "TaskSignals",
    "TaskStatus",
    "TaskStore",
    "TasksExtension",
    "current_task",
    "store_from_url",
    "task_routing_middleware",
]


__getattr__ = lazy_getattr(__name__, _LAZY)
