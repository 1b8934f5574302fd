"""Answering a server's input request through the ``Client``'s own callbacks."""

from __future__ import annotations

import mcp_types as types
from mcp.client.session import ClientRequestContext, ClientSession

__all__ = ["answer_through_callbacks"]


async def answer_through_callbacks(
    session: ClientSession, key: str, request: types.InputRequest
) -> types.InputResponse | types.ErrorData:
    """Route one input request (elicitation, sampling, roots) to the session's callbacks.

    The callbacks are the ones that declared those capabilities, so an answer can only come from
    a kind of request the client said it supports; a declined request returns ``ErrorData``.
    """
    meta = request.params.meta if request.params is not None else None
    context = ClientRequestContext(session=session, request_id=key, meta=meta)
    return await session.dispatch_input_request(context, request)
