"""Reading ``io.modelcontextprotocol/tool-approval-disposition`` from a completed task's result.

SEP-2848 §Execution disposition: a client that does not recognize a value MUST treat the
operation as possibly executed and MUST NOT retry it automatically. :class:`ExecutionDisposition`
encodes that: only ``denied-not-executed`` says the tool did not run, and no disposition ever
invites an automatic retry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from mcp_approval.protocol import (
    DISPOSITION_APPROVED_EXECUTED,
    DISPOSITION_DENIED_NOT_EXECUTED,
    DISPOSITION_EXECUTION_ERROR,
    DISPOSITION_OUTCOME_UNKNOWN,
    META_TOOL_APPROVAL_DISPOSITION,
)

__all__ = ["KNOWN_DISPOSITIONS", "ExecutionDisposition", "read_disposition"]

KNOWN_DISPOSITIONS = frozenset(
    {
        DISPOSITION_APPROVED_EXECUTED,
        DISPOSITION_DENIED_NOT_EXECUTED,
        DISPOSITION_EXECUTION_ERROR,
        DISPOSITION_OUTCOME_UNKNOWN,
    }
)


@dataclass(frozen=True)
class ExecutionDisposition:
    """What happened to an approval-gated call's execution.

    Attributes:
        value: the disposition string as the server sent it.
    """

    value: str

    @property
    def recognized(self) -> bool:
        """Whether this client knows the value."""
        return self.value in KNOWN_DISPOSITIONS

    @property
    def executed(self) -> bool:
        """Whether the tool certainly ran (``approved-executed``)."""
        return self.value == DISPOSITION_APPROVED_EXECUTED

    @property
    def possibly_executed(self) -> bool:
        """Whether a side effect may have happened: everything except ``denied-not-executed``.

        An unrecognized value counts as possibly executed.
        """
        return self.value != DISPOSITION_DENIED_NOT_EXECUTED

    @property
    def may_retry_automatically(self) -> bool:
        """Never: executed calls must not repeat, denials are final, unknown values may have run."""
        return False


def read_disposition(result: types.CallToolResult | Mapping[str, Any]) -> ExecutionDisposition | None:
    """The disposition in a ``CallToolResult``'s ``_meta``; ``None`` when absent or not a string."""
    meta = result.get("_meta") if isinstance(result, Mapping) else result.meta
    value = meta.get(META_TOOL_APPROVAL_DISPOSITION) if isinstance(meta, Mapping) else None
    return ExecutionDisposition(value) if isinstance(value, str) and value else None
