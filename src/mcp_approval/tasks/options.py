"""Configuration of the tasks extension.

:class:`TaskOptions` is also the ``[tasks]`` section of a deployment file.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["PrincipalLookup", "TaskMode", "TaskOptions"]

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext


class TaskMode(StrEnum):
    """How a tool may be answered when the client declared the tasks extension.

    - ``forbidden``: always an ordinary result.
    - ``optional``: a task if the call is still running after ``threshold_s``.
    - ``required``: always a task; a client that did not declare the extension gets ``-32021``.
    """

    FORBIDDEN = "forbidden"
    OPTIONAL = "optional"
    REQUIRED = "required"


PrincipalLookup = Callable[["ServerRequestContext[Any, Any]"], "str | None"]
"""The authenticated principal of a request, or ``None`` for an anonymous caller.

The policy gate asks it for the AuthZEN subject and the tasks extension for the task owner, so
both see one identity per request.
"""


class TaskOptions(BaseModel):
    """Options of :class:`~mcp_approval.tasks.TasksExtension`: the ``[tasks]`` section of a deployment file.

    One model serves code and file alike, validated by the same rules with the same message.
    The store and the principal lookup are runtime objects, not options: they are
    ``TasksExtension``'s own arguments.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: An ``optional`` tool still running after this many seconds becomes a task; one that
    #: finishes sooner answers with its ordinary result. ``None``: only ``required`` tools (and
    #: approvals) become tasks.
    threshold_s: float | None = Field(default=5.0, ge=0)
    #: How long a task is kept, counted from its creation (approval tasks extend it as they need);
    #: ``None`` keeps it forever.
    ttl_s: float | None = Field(default=3600.0, gt=0)
    #: The ``pollIntervalMs`` suggested to clients, and the pace of lease renewal.
    poll_interval_s: float = Field(default=2.0, gt=0)
    #: Above this many unfinished tasks in the store (approval tasks included), calls answer without
    #: a task and a WARNING is logged; a requestable denial then gets a final denial instead.
    max_tasks: int = Field(default=10_000, ge=0)
    #: The same limit for one caller.
    max_per_principal: int = Field(default=100, ge=0)
    #: Per-tool task modes (``forbidden``, ``optional``, ``required``); other tools use ``default_mode``.
    modes: dict[str, TaskMode] = Field(default_factory=dict)
    #: The mode of tools not named in ``modes``.
    default_mode: TaskMode = TaskMode.OPTIONAL
    #: Give tasks to unauthenticated HTTP callers. Such tasks are bound to no principal, so their ids
    #: act as bearer capabilities. Off by default.
    allow_anonymous_tasks: bool = False
    #: A worker silent for ``3 * poll_interval_s`` plus this long is dead; its running tasks become ``failed``.
    lease_grace_s: float = Field(default=5.0, ge=0)
    #: How often expired tasks are purged and lapsed leases failed (a deployment file's default is
    #: the smaller of 1 s and ``poll_interval_s``).
    sweep_interval_s: float = Field(default=1.0, gt=0)
    #: The largest ``inputResponses`` a ``tasks/update`` may carry, in bytes.
    max_input_response_bytes: int = Field(default=1_048_576, ge=1)

    @field_validator("modes")
    @classmethod
    def _named_tools(cls, modes: dict[str, TaskMode]) -> dict[str, TaskMode]:
        if any(not tool for tool in modes):
            raise ValueError("a tool name is empty")
        return modes

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
