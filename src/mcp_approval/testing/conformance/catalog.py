"""Resource, prompt and completion fixtures, plus the 2025-era ``logging``/``subscribe`` handlers."""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer, UserMessage
from mcp.server.mcpserver.prompts import Prompt

from mcp_approval._sdk import add_request_handler
from mcp_approval.testing.conformance._common import PNG_BASE64, text

__all__ = ["register"]

logger = logging.getLogger(__name__)

#: URIs subscribed through 2025-era ``resources/subscribe`` (the fixture only records them).
SUBSCRIPTIONS: set[str] = set()


def static_text() -> str:
    """A static text resource."""
    return "This is the content of the static text resource."


def static_binary() -> bytes:
    """A static binary resource (a PNG image)."""
    return base64.b64decode(PNG_BASE64)


def template_data(id: str) -> str:
    """A templated JSON resource echoing its ``id`` (the parameter is named after the URI variable)."""
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


def watched_resource() -> str:
    """A resource clients may subscribe to."""
    return "Watched resource content"


def test_simple_prompt() -> list[UserMessage]:
    """A prompt without arguments."""
    return [UserMessage(text("This is a simple prompt for testing."))]


def test_prompt_with_arguments(arg1: str, arg2: str) -> list[UserMessage]:
    """A prompt with two required arguments."""
    return [UserMessage(text(f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"))]


def test_prompt_with_embedded_resource(resourceUri: str) -> list[UserMessage]:
    """A prompt that embeds the resource named by ``resourceUri``."""
    contents = types.TextResourceContents(
        uri=resourceUri, mime_type="text/plain", text="Embedded resource content for testing."
    )
    embedded = types.EmbeddedResource(type="resource", resource=contents)
    return [UserMessage(embedded), UserMessage(text("Please process the embedded resource above."))]


def test_prompt_with_image() -> list[UserMessage]:
    """A prompt that carries an image."""
    image = types.ImageContent(type="image", data=PNG_BASE64, mime_type="image/png")
    return [UserMessage(image), UserMessage(text("Please analyze the image above."))]


def _register_resources(server: MCPServer[Any]) -> None:
    server.resource("test://static-text", name="static_text", mime_type="text/plain")(static_text)
    server.resource("test://static-binary", name="static_binary", mime_type="image/png")(static_binary)
    server.resource("test://template/{id}/data", name="template_data", mime_type="application/json")(template_data)
    server.resource("test://watched-resource", name="watched_resource", mime_type="text/plain")(watched_resource)


def _register_prompts(server: MCPServer[Any]) -> None:
    for fn in (test_simple_prompt, test_prompt_with_arguments, test_prompt_with_embedded_resource):
        server.add_prompt(Prompt.from_function(fn))
    server.add_prompt(Prompt.from_function(test_prompt_with_image))


async def _complete(
    ref: types.PromptReference | types.ResourceTemplateReference,
    argument: types.CompletionArgument,
    context: types.CompletionContext | None,
) -> types.Completion:
    """Completion for prompt and template arguments: values starting with what was typed."""
    candidates = ["paris", "park", "party"] if argument.name == "arg1" else []
    values = [value for value in candidates if value.startswith(argument.value)]
    return types.Completion(values=values, total=len(values), has_more=False)


async def _set_level(ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams) -> types.EmptyResult:
    logger.info("Client set the log level to %s", params.level)
    return types.EmptyResult()


async def _subscribe(ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams) -> types.EmptyResult:
    SUBSCRIPTIONS.add(str(params.uri))
    return types.EmptyResult()


async def _unsubscribe(
    ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
) -> types.EmptyResult:
    SUBSCRIPTIONS.discard(str(params.uri))
    return types.EmptyResult()


def _register_protocol_handlers(server: MCPServer[Any]) -> None:
    server.completion()(_complete)  # type: ignore[no-untyped-call]  # public, but the SDK leaves it unannotated
    # MCPServer has no decorator for these spec methods; the runner already answers -32601 for these
    # 2025-only ones on a 2026-07-28 request, so registering them is era-safe.
    add_request_handler(server, "logging/setLevel", types.SetLevelRequestParams, _set_level)
    add_request_handler(server, "resources/subscribe", types.SubscribeRequestParams, _subscribe)
    add_request_handler(server, "resources/unsubscribe", types.UnsubscribeRequestParams, _unsubscribe)


def register(server: MCPServer[Any]) -> None:
    """Register the resources, prompts, completion and 2025-era protocol handlers."""
    _register_resources(server)
    _register_prompts(server)
    _register_protocol_handlers(server)
