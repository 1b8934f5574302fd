"""What the reviewer console shows: the template environment and the figures pages display.

Every template is autoescaped. On top of that, every string a template prints has its control
and invisible formatting characters (bidi overrides, zero-width spaces) shown as ``\\uXXXX``,
so an attacker-chosen argument cannot make a reviewer read something other than what was sent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jinja2 import Environment, PackageLoader
from markupsafe import Markup

from mcp_approval.backends import REDACTED, ApprovalRecord
from mcp_approval.clock import iso8601
from mcp_approval.storage.audit import AuditEvent

__all__ = ["SUMMARY_CHARS", "EventView", "RequestView", "environment", "human_duration", "json_value", "timestamp"]

#: Characters a reviewer could not see or that reorder text: C0/C1 controls (but tab and newline),
#: zero-width and bidi formatting characters, the byte order mark.
_INVISIBLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff]")
#: The longest argument summary shown in the pending list.
SUMMARY_CHARS = 140


def _visible(value: Any) -> Any:
    """``value`` with invisible characters made visible (markup the templates built is left alone)."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return _INVISIBLE.sub(lambda match: f"\\u{ord(match.group()):04x}", value)
    return value


def environment() -> Environment:
    """The console's templates (``reviewers/templates``), autoescaped."""
    env = Environment(
        loader=PackageLoader("mcp_approval.reviewers", "templates"),
        autoescape=True,
        finalize=_visible,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["json"] = json_value
    env.filters["when"] = timestamp
    return env


def json_value(value: Any) -> str:
    """An argument value as a reviewer reads it: JSON, with strings quoted."""
    if value == REDACTED:
        return REDACTED
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def human_duration(ms: int) -> str:
    """A duration in its two largest units, rounded down (``45 s``, ``3 min``, ``2 h 5 min``, ``3 d 4 h``)."""
    seconds = max(ms, 0) // 1000
    if seconds < 60:
        return f"{seconds} s"
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86_400
    if minutes < 60:
        return f"{minutes} min"
    if hours < 24:
        rest = minutes % 60
        return f"{hours} h {rest} min" if rest else f"{hours} h"
    rest = hours % 24
    return f"{days} d {rest} h" if rest else f"{days} d"


def timestamp(ms: int) -> str:
    """An instant as ``2026-11-29 16:52 UTC``."""
    return iso8601(ms)[:16].replace("T", " ") + " UTC"


@dataclass(frozen=True)
class RequestView:
    """One approval request as the console pages show it."""

    record: ApprovalRecord
    now_ms: int

    @property
    def heading(self) -> str:
        """The policy's title, else the tool name."""
        return self.record.title or self.record.tool

    @property
    def approvals(self) -> int:
        """How many reviewers approved so far."""
        return sum(1 for decision in self.record.decisions if decision.decision == "approve")

    @property
    def progress(self) -> str:
        """``1 of 2 approvals``."""
        noun = "approval" if self.record.approvals_required == 1 else "approvals"
        return f"{self.approvals} of {self.record.approvals_required} {noun}"

    @property
    def age(self) -> str:
        """How long ago the request was made."""
        return human_duration(self.now_ms - self.record.created_at) + " ago"

    @property
    def deadline(self) -> str:
        """When the request stops accepting decisions, relative to now."""
        if self.record.expires_at is None:
            return "none"
        left = self.record.expires_at - self.now_ms
        return f"in {human_duration(left)}" if left > 0 else "passed"

    @property
    def deadline_at(self) -> str:
        """The deadline as an absolute time, or an empty string."""
        return "" if self.record.expires_at is None else timestamp(self.record.expires_at)

    @property
    def created_at(self) -> str:
        """When the request was made, as an absolute time."""
        return timestamp(self.record.created_at)

    @property
    def decided_at(self) -> str:
        """When the latest decision was recorded (absolute), or an empty string."""
        latest = max((d.decided_at for d in self.record.decisions), default=None)
        return "" if latest is None else timestamp(latest)

    @property
    def summary(self) -> str:
        """The arguments on one line, cut at :data:`SUMMARY_CHARS`."""
        if self.record.integrity_failure is not None:
            return "altered after submission: not shown"
        text = ", ".join(f"{name}: {json_value(value)}" for name, value in self.record.arguments.items())
        return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"

    def decided_by(self, principal: str) -> bool:
        """Whether ``principal`` already recorded a decision on this request."""
        return any(decision.reviewer == principal for decision in self.record.decisions)


@dataclass(frozen=True)
class EventView:
    """One audit event as the audit trail shows it."""

    event: AuditEvent

    @property
    def at(self) -> str:
        """When it happened, with seconds."""
        return iso8601(self.event.at)[:19].replace("T", " ") + " UTC"

    @property
    def details(self) -> str:
        """The event's data as ``name=value`` pairs."""
        return " ".join(f"{name}={json_value(value)}" for name, value in sorted(_items(self.event.data)))


def _items(data: Mapping[str, Any]) -> list[tuple[str, Any]]:
    return [(str(name), value) for name, value in data.items()]
