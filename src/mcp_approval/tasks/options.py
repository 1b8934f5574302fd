"""Configuration of the tasks extension."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from mcp_approval.hosts import is_loopback_host

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
        store: the durable task store; ``None`` builds one from ``store_url``.
        store_url: ``sqlite:///PATH``, ``sqlite://`` (in memory, one process), ``postgresql://...``, or
            ``redis://host:port/db[?prefix=KEYPREFIX]`` (:class:`~mcp_approval.tasks.redis_store.RedisTaskStore`,
            with the ``redis`` extra; tasks only, approval-gated deployments need a SQL store).
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
        approval_url: the page where reviewers decide an approval (your own UI over the reviewer
            API's ``POST /approvals/{id}/decide``), with ``{approval_id}`` where the approval's id
            goes. When set, an approval task created by a request that declared URL elicitation
            starts ``input_required`` with one url-mode ``elicitation/create`` naming that page.
            The link is only a pointer: answering it never approves, the backend still decides.
            Must be ``https`` (``http`` only on a loopback host). ``None``: no link (the default).
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
    approval_url: str | None = None

    def __post_init__(self) -> None:
        if self.approval_url is not None:
            check_approval_url(self.approval_url, field_name="TaskOptions.approval_url")
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

    def approval_link(self, approval_id: str) -> str | None:
        """``approval_url`` with ``approval_id`` filled in (percent-encoded), or ``None`` when unset."""
        if self.approval_url is None:
            return None
        return self.approval_url.replace(APPROVAL_ID_PLACEHOLDER, quote(approval_id, safe=""))

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


#: Where the approval's id goes in :attr:`TaskOptions.approval_url`.
APPROVAL_ID_PLACEHOLDER = "{approval_id}"


def check_approval_url(url: str, *, field_name: str) -> None:
    """Refuse an approval page URL that could leak a link over plain HTTP or name no approval.

    The rules: an absolute ``https`` URL (``http`` only when the host is a loopback address or
    ``localhost``), no user or password in it, and ``{approval_id}`` in its path, query or
    fragment (never in the host).

    Raises:
        ValueError: naming ``field_name`` and the rule broken.
    """
    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"{field_name} must be a URL string, got {url!r}")
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError as exc:
        raise ValueError(f"{field_name} is not a valid URL ({exc}): {url!r}") from None
    if parts.scheme not in ("https", "http") or not host:
        raise ValueError(f"{field_name} must be an absolute https URL (http only on a loopback host): {url!r}")
    if parts.scheme == "http" and not is_loopback_host(host):
        raise ValueError(f"{field_name} must be https; http is allowed only on a loopback host, not {host!r}")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"{field_name} must not carry a user name or password: {url!r}")
    if APPROVAL_ID_PLACEHOLDER in parts.netloc:
        raise ValueError(f"{field_name}: {APPROVAL_ID_PLACEHOLDER} may not be part of the host: {url!r}")
    if APPROVAL_ID_PLACEHOLDER not in url:
        raise ValueError(f"{field_name} must contain {APPROVAL_ID_PLACEHOLDER} where the approval's id goes: {url!r}")
