"""The SEP-2663 tasks runtime: server extension, store contract and the tool-side API.

Typical use::

    from mcp.server.mcpserver import MCPServer
    from mcp_approval.tasks import SqlTaskStore, TaskOptions, TasksExtension, task_routing_middleware

    tasks = TasksExtension(TaskOptions(threshold_s=1.0), store=SqlTaskStore("sqlite:///tasks.db"))
    server = MCPServer("demo", extensions=[tasks], lifespan=tasks.lifespan,
                       middleware=[task_routing_middleware])
"""

from mcp_approval.tasks.execution import Execution, current_task
from mcp_approval.tasks.middleware import task_routing_middleware
from mcp_approval.tasks.models import TaskRecord
from mcp_approval.tasks.options import TaskMode, TaskOptions
from mcp_approval.tasks.server import TasksExtension
from mcp_approval.tasks.sql_store import SqlTaskStore
from mcp_approval.tasks.states import TaskStatus
from mcp_approval.tasks.store import NewTask, TaskSignal, TaskStore
from mcp_approval.tasks.store_url import store_from_url

__all__ = [
    "Execution",
    "NewTask",
    "SqlTaskStore",
    "TaskMode",
    "TaskOptions",
    "TaskRecord",
    "TaskSignal",
    "TaskStatus",
    "TaskStore",
    "TasksExtension",
    "current_task",
    "store_from_url",
    "task_routing_middleware",
]
