"""Configuration of the tasks extension."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

    from mcp_approval.tasks.store import TaskStore


class TaskMode(StrEnum):
    """How a tool may be answered when the client declared the tasks extension.

    - ``forbidden``: always an ordinary result.
    - ``optional``: a task if the call is still running after ``threshold_s``.
    - ``required``: always a task; a client that did not declare the extension gets ``-32021``.
    """

    FORBIDDEN = "forbidden"
    OPTIONAL = "optional"
    REQUIRED = "required"


PrincipalResolver = Callable[["ServerRequestContext[Any, Any]"], "str | None"]
"""Returns the caller's identity for a request, or ``None`` for an anonymous caller."""


@dataclass(frozen=True)
class TaskOptions:
    """Options of :class:`~mcp_approval.tasks.TasksExtension`.

    Args:
        threshold_s: an ``optional`` tool still running after this many seconds becomes a task;
            one that finishes sooner answers with its ordinary result. ``None``: only
            ``required`` tools (and approvals) become tasks.
        ttl_s: how long a task is kept, counted from its creation; ``None`` keeps it forever.
        poll_interval_s: the ``pollIntervalMs`` suggested to clients.
        max_tasks: above this many unfinished tasks in the store, calls answer without a task.
        max_per_principal: the same limit for one caller.
        store: the durable task store; ``None`` builds a SQL store from ``store_url``.
        store_url: ``sqlite:///PATH``, ``sqlite://`` (in memory, one process) or ``postgresql://...``.
        modes: per-tool task modes; tools not named here use ``default_mode``.
        default_mode: the mode of tools not named in ``modes``.
        allow_anonymous_tasks: give tasks to unauthenticated HTTP callers. Such tasks are bound to
            no principal, so their ids act as bearer capabilities. Off by default.
        lease_grace_s: a worker that has not renewed its lease for ``3 * poll_interval_s`` plus
            this long is considered dead, and its unfinished tasks become ``failed``.
        sweep_interval_s: how often expired tasks are purged and lapsed leases failed.
        principal_resolver: maps a request to the caller's identity; defaults to the SDK's
            authenticated principal, with in-process and stdio callers treated as one local caller.
        max_input_response_bytes: the largest ``inputResponses`` a ``tasks/update`` may carry.
    """

    threshold_s: float | None = 5.0
    ttl_s: float | None = 3600.0
    poll_interval_s: float = 2.0
    max_tasks: int = 10_000
    max_per_principal: int = 100
    store: TaskStore | None = None
    store_url: str = "sqlite://"
    modes: Mapping[str, TaskMode] = field(default_factory=dict)
    default_mode: TaskMode = TaskMode.OPTIONAL
    allow_anonymous_tasks: bool = False
    lease_grace_s: float = 5.0
    sweep_interval_s: float = 1.0
    principal_resolver: PrincipalResolver | None = None
    max_input_response_bytes: int = 1_048_576

    def __post_init__(self) -> None:
        if self.threshold_s is not None and self.threshold_s < 0:
            raise ValueError("TaskOptions.threshold_s must be >= 0 or None")
        if self.ttl_s is not None and self.ttl_s <= 0:
            raise ValueError("TaskOptions.ttl_s must be > 0 or None")
        if self.poll_interval_s <= 0:
            raise ValueError("TaskOptions.poll_interval_s must be > 0")
        if self.max_tasks < 0 or self.max_per_principal < 0:
            raise ValueError("TaskOptions.max_tasks and max_per_principal must be >= 0")
        if self.lease_grace_s < 0 or self.sweep_interval_s <= 0:
            raise ValueError("TaskOptions.lease_grace_s must be >= 0 and sweep_interval_s > 0")
        if any(not tool for tool in self.modes):
            raise ValueError("TaskOptions.modes has an empty tool name")
        # Checked and converted once (ValueError names a bad mode), so mode_of is a dict lookup.
        object.__setattr__(self, "modes", {tool: TaskMode(mode) for tool, mode in self.modes.items()})
        object.__setattr__(self, "default_mode", TaskMode(self.default_mode))

    def mode_of(self, tool: str) -> TaskMode:
        """The task mode of ``tool``."""
        return self.modes.get(tool, self.default_mode)

    @property
    def ttl_ms(self) -> int | None:
        """``ttl_s`` in whole milliseconds."""
        return None if self.ttl_s is None else round(self.ttl_s * 1000)

    @property
    def poll_interval_ms(self) -> int:
        """``poll_interval_s`` in whole milliseconds (at least 1)."""
        return max(1, round(self.poll_interval_s * 1000))

    @property
    def lease_ms(self) -> int:
        """How long a worker's lease on a running task lasts: three polls plus the grace."""
        return 3 * self.poll_interval_ms + round(self.lease_grace_s * 1000)
