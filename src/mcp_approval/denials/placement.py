"""Which placement a server-side-state denial takes, given what the denied request declared.

SEP-2643 Use Case 1 offers two interactions, each open only to a client that declared it on the
denied request: a URL the user completes (``elicitation.url``) and an out-of-band decision held
by a task (``io.modelcontextprotocol/tasks``). A remedy that exists but cannot be offered to this
client is ``undisclosed``, never ``unavailable``.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

import mcp_types as types
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_approval.protocol import TASKS_EXTENSION

__all__ = ["Interaction", "Placement", "choose_placement", "declared_interactions"]


class Interaction(StrEnum):
    """An interaction that can remedy a denial by establishing server-side state."""

    URL = "url"
    """The user opens a URL while the request is in flight (``InputRequiredResult``)."""

    TASK = "task"
    """Someone else decides, perhaps long after the response (``CreateTaskResult``)."""


class Placement(StrEnum):
    """Where, and with which ``remediation``, a server-side-state denial is expressed."""

    URL_INTERACTION = "url_interaction"
    """Case 1: ``InputRequiredResult``, ``available``, a ``url`` hint."""

    TASK = "task"
    """Case 2: ``CreateTaskResult``, ``available``, a ``task`` hint."""

    UNDISCLOSED = "undisclosed"
    """Case 4: ``CallToolResult`` with ``isError``: a remedy exists, this client cannot be offered it."""

    UNAVAILABLE = "unavailable"
    """Case 4: ``CallToolResult`` with ``isError``: no remedy exists."""


_PLACEMENT = {Interaction.URL: Placement.URL_INTERACTION, Interaction.TASK: Placement.TASK}


def declared_interactions(
    capabilities: types.ClientCapabilities | None, *, protocol_version: str | None = None
) -> frozenset[Interaction]:
    """The interactions the denied request's capabilities open.

    Both interactions are 2026-07-28 result shapes, so a request known to be on an older
    protocol version opens neither, whatever it declared.
    """
    if capabilities is None or (protocol_version is not None and protocol_version not in MODERN_PROTOCOL_VERSIONS):
        return frozenset()
    declared: set[Interaction] = set()
    if capabilities.elicitation is not None and capabilities.elicitation.url is not None:
        declared.add(Interaction.URL)
    if capabilities.extensions and TASKS_EXTENSION in capabilities.extensions:
        declared.add(Interaction.TASK)
    return frozenset(declared)


def choose_placement(
    capabilities: types.ClientCapabilities | None,
    remedies: Iterable[Interaction],
    *,
    protocol_version: str | None = None,
) -> Placement:
    """The placement for a denial that ``remedies`` (in the server's order of preference) could remedy.

    The first remedy the request declared wins. With remedies but none declared the answer is
    :attr:`Placement.UNDISCLOSED`; only an empty ``remedies`` gives :attr:`Placement.UNAVAILABLE`.
    """
    offered = list(remedies)
    declared = declared_interactions(capabilities, protocol_version=protocol_version)
    for remedy in offered:
        if remedy in declared:
            return _PLACEMENT[remedy]
    return Placement.UNDISCLOSED if offered else Placement.UNAVAILABLE
