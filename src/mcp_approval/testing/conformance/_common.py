"""Small builders shared by the conformance fixture modules."""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server.mcpserver import Context

__all__ = [
    "PNG_BASE64",
    "WAV_BASE64",
    "AnyContext",
    "accepted_content",
    "declares",
    "elicit_request",
    "form_schema",
    "response_for",
    "roots_request",
    "sampling_request",
    "text",
]

#: A 1x1 transparent PNG, the image every image fixture returns.
PNG_BASE64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
#: A minimal WAV header with two bytes of silence, the audio every audio fixture returns.
WAV_BASE64 = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

AnyContext = Context[Any, Any]


def form_schema(properties: dict[str, str], required: list[str] | None = None) -> dict[str, Any]:
    """A flat elicitation form schema: property name -> JSON type."""
    return {
        "type": "object",
        "properties": {name: {"type": kind} for name, kind in properties.items()},
        "required": list(properties) if required is None else required,
    }


def elicit_request(message: str, properties: dict[str, str]) -> types.ElicitRequest:
    """An ``elicitation/create`` input request asking for ``properties``."""
    params = types.ElicitRequestFormParams(message=message, requested_schema=form_schema(properties))
    return types.ElicitRequest(params=params)


def sampling_request(prompt: str, max_tokens: int) -> types.CreateMessageRequest:
    """A ``sampling/createMessage`` input request with one user text message."""
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))
    params = types.CreateMessageRequestParams(messages=[message], max_tokens=max_tokens)
    return types.CreateMessageRequest(params=params)


def roots_request() -> types.ListRootsRequest:
    """A ``roots/list`` input request."""
    return types.ListRootsRequest(params=types.RequestParams())


def response_for(ctx: AnyContext, key: str) -> types.InputResponse | None:
    """The client's answer to input request ``key`` on this retry, if any."""
    responses = ctx.input_responses or {}
    return responses.get(key)


def accepted_content(ctx: AnyContext, key: str) -> dict[str, Any] | None:
    """The form content of an accepted elicitation answer to ``key``, else ``None``."""
    answer = response_for(ctx, key)
    if isinstance(answer, types.ElicitResult) and answer.action == "accept":
        return dict(answer.content or {})
    return None


def declares(ctx: AnyContext, capability: str) -> bool:
    """Whether this request's client capabilities declare ``capability`` (a top-level key)."""
    caps = ctx.client_capabilities
    return caps is not None and getattr(caps, capability, None) is not None


def text(value: str) -> types.TextContent:
    """A text content block."""
    return types.TextContent(type="text", text=value)
