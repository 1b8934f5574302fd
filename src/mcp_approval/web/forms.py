"""Guards of the HTML forms reviewers post (the console, e-mail links): who may post, what a form and a path may hold.

A POST a browser says came from another site is refused before anything is read; a form is
urlencoded, at most :data:`MAX_FORM_BYTES`, each field once; a path's request id holds no NUL
character. Each refusal is a :class:`Refused`, which the page answers with an error page.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from starlette.requests import Request

from mcp_approval.errors import MCPApprovalError
from mcp_approval.safe_text import storable

__all__ = ["MAX_FORM_BYTES", "Refused", "check_origin", "path_request_id", "read_form"]

#: The largest form body accepted (a comment is at most MAX_COMMENT_CHARS characters).
MAX_FORM_BYTES = 16_384


class Refused(MCPApprovalError):
    """A request answered with an error page (nothing was read or decided); ``status`` is its HTTP status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def check_origin(request: Request) -> None:
    """Refuse a POST a browser says came from another site (CSRF defence in depth)."""
    if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        raise Refused(403, "Cross-site form submissions are refused.")
    origin = request.headers.get("origin")
    if origin is not None:
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or parts.netloc != request.headers.get("host"):
            raise Refused(403, "Cross-site form submissions are refused.")


def path_request_id(request: Request) -> str:
    """The path's request id; one no store can hold (a NUL, a lone surrogate) names no request."""
    request_id: str = request.path_params["request_id"]
    if not storable(request_id):
        raise Refused(404, "There is no such approval request.")
    return request_id


async def read_form(request: Request, *, max_fields: int = 8) -> dict[str, str]:
    """The urlencoded form body, each field at most once, at most ``max_fields`` fields.

    Raises:
        Refused: another media type (415), a body over :data:`MAX_FORM_BYTES` (413), or a body
            that does not decode or repeats a field (400).
    """
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/x-www-form-urlencoded":
        raise Refused(415, "The form must be sent as application/x-www-form-urlencoded.")
    body = bytearray()
    async for chunk in request.stream():
        body.extend(chunk)
        if len(body) > MAX_FORM_BYTES:
            raise Refused(413, "The form is too large.")
    try:
        fields = parse_qs(
            bytes(body).decode("utf-8"), keep_blank_values=True, max_num_fields=max_fields, errors="strict"
        )
    except (UnicodeDecodeError, ValueError):
        raise Refused(400, "The form could not be read.") from None
    if any(len(values) != 1 for values in fields.values()):
        raise Refused(400, "A form field was sent more than once.")
    return {name: values[0] for name, values in fields.items()}
