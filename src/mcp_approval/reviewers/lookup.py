"""Finding a request by what a reviewer was given: its id, or the reference its requester quotes.

An agent tells its user "waiting for approval, reference 1ZirQ95Q…": that reference is the id of
the task carrying the call, not the approval request's id. The reviewer API, the console and
``mcp-approval review show`` accept either. A reference leads to a request only through
:meth:`~mcp_approval.backends.outcomes.OutcomeReader.request_of`, and then only to a request the
viewer may see: for anyone else it is unknown, the same answer as for a reference that names
nothing, so a reference does not reveal that a request exists.
"""

from __future__ import annotations

from mcp_approval.backends import ApprovalRecord, SupportsReview
from mcp_approval.backends.outcomes import OutcomeReader

__all__ = ["MAX_REFERENCE_CHARS", "find_request"]

#: The longest id or reference looked up (request ids and task ids are far shorter).
MAX_REFERENCE_CHARS = 512


async def find_request(
    backend: SupportsReview, wanted: str, viewer: str | None, outcomes: OutcomeReader | None
) -> ApprovalRecord | None:
    """The request ``wanted`` names (its id, or its requester's reference) as ``viewer`` sees it.

    ``None`` when it names no request, or one ``viewer`` may not see. Without ``outcomes`` only
    ids are known. A NUL character or a value over :data:`MAX_REFERENCE_CHARS` names nothing (no
    store accepts the one, and the other is no id).
    """
    wanted = wanted.strip()
    if not wanted or "\x00" in wanted or len(wanted) > MAX_REFERENCE_CHARS:
        return None
    record = await backend.get_request(wanted, viewer=viewer)
    if record is not None or outcomes is None:
        return record
    handle = await outcomes.request_of(wanted)
    if handle is None or handle == wanted:
        return None
    return await backend.get_request(handle, viewer=viewer)
