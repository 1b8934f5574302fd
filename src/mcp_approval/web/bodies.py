"""Reading request bodies sent by anyone: bounded length, strict JSON, bounded nesting.

:func:`read_body` stops reading once a body passes its endpoint's limit (:class:`BodyTooLargeError`,
answered 413). Python's parser accepts ``NaN`` and ``Infinity`` and nests as deep as the interpreter's recursion
limit allows, failing past it with a ``RecursionError`` (an HTTP 500 if nobody expects it). The
HTTP endpoints parse bodies with :func:`parse_json_body` instead, so either case is a plain
:class:`JsonBodyError` they answer with a 400.
"""

from __future__ import annotations

import json
from typing import Any, Final

from starlette.requests import Request

from mcp_approval.errors import MCPApprovalError

__all__ = ["MAX_JSON_DEPTH", "BodyTooLargeError", "JsonBodyError", "parse_json_body", "read_body"]

#: The deepest nesting of objects and arrays accepted in a request body (``{}`` is depth 1).
MAX_JSON_DEPTH: Final = 64


class JsonBodyError(MCPApprovalError, ValueError):
    """A request body that is not acceptable JSON; the message says why without quoting the body."""


class BodyTooLargeError(MCPApprovalError, ValueError):
    """A request body longer than its endpoint accepts (answered ``413``)."""


async def read_body(request: Request, max_bytes: int) -> bytes:
    """The request body, read as it streams in and abandoned as soon as it passes ``max_bytes``.

    A ``Content-Length`` over the limit is refused before anything is read, so no endpoint holds
    more than ``max_bytes`` (plus one chunk) of a body it will refuse.

    Raises:
        BodyTooLargeError: the body is (or announces itself) longer than ``max_bytes``.
    """
    too_large = BodyTooLargeError(f"the request body exceeds {max_bytes} bytes")
    announced = request.headers.get("content-length", "")
    if announced.isascii() and announced.isdigit() and int(announced) > max_bytes:
        raise too_large
    body = bytearray()
    async for chunk in request.stream():
        body.extend(chunk)
        if len(body) > max_bytes:
            raise too_large
    return bytes(body)


def parse_json_body(raw: bytes | str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The JSON value of ``raw``.

    Raises:
        JsonBodyError: ``raw`` is not UTF-8 JSON, uses ``NaN``/``Infinity``, or nests objects and
            arrays more than ``max_depth`` levels deep.
    """
    too_deep = f"the request body nests objects and arrays more than {max_depth} levels deep"
    try:
        value = json.loads(raw, parse_constant=_reject_constant)
    except RecursionError:
        raise JsonBodyError(too_deep) from None
    except ValueError:  # includes UnicodeDecodeError
        raise JsonBodyError("the request body is not valid JSON") from None
    if _deeper_than(value, max_depth):
        raise JsonBodyError(too_deep)
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests containers more than ``limit`` deep (iteratively: no recursion)."""
    pending: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, dict | list) else []
    while pending:
        item, depth = pending.pop()
        children = item.values() if isinstance(item, dict) else item
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False
