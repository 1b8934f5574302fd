"""OpenAPI path items of the reviewer API and the reviewer console (see :mod:`mcp_approval.openapi`)."""

from __future__ import annotations

from typing import Any

from mcp_approval.openapi import problem_response
from mcp_approval.reviewers.limits import MAX_COMMENT_CHARS, MAX_PAGE_SIZE

__all__ = ["console_paths", "reviewer_paths"]

_BEARER: list[dict[str, list[str]]] = [{"bearer": []}]
_ID = {"name": "request_id", "in": "path", "required": True, "schema": {"type": "string"}}
#: An identical earlier call whose request ended: the record may duplicate it (``null``: none known).
_EARLIER = {
    "type": ["object", "null"],
    "required": ["request_id", "task_id", "outcome", "ran", "ended_at", "text"],
    "properties": {
        "request_id": {"type": "string"},
        "task_id": {"type": "string"},
        "outcome": {"type": "string"},
        "ran": {"type": "boolean"},
        "ended_at": {"type": "string", "format": "date-time"},
        "text": {"type": "string"},
    },
}
#: One reminder or escalation a channel delivered: who (a role) was told, when, on which channel.
_TOLD = {
    "type": "object",
    "required": ["step", "role", "channel", "at"],
    "properties": {
        "step": {"enum": ["remind", "escalate"]},
        "role": {"type": "string"},
        "channel": {"type": "string"},
        "at": {"type": "string", "format": "date-time"},
    },
}
_RECORD = {
    "type": "object",
    "required": ["id", "status", "tool", "possible_duplicate_of"],
    "properties": {"possible_duplicate_of": _EARLIER, "told": {"type": "array", "items": _TOLD}},
}
_HTML = {"text/html": {"schema": {"type": "string"}}}
_REFUSALS = {
    str(status): problem_response(text)
    for status, text in ((401, "no valid token"), (429, "throttled"), (503, "the store is unreachable: try again"))
}
_UNREACHABLE_PAGE = {"503": {"description": "the store is unreachable: try again", "content": _HTML}}


def reviewer_paths() -> dict[str, Any]:
    """``/approvals``, ``/approvals/{request_id}`` and its ``/decide``."""
    listing = {
        "type": "object",
        "required": ["approvals", "total", "offset", "limit", "next_offset"],
        "properties": {"approvals": {"type": "array", "items": _RECORD}, "total": {"type": "integer"}},
    }
    decision = {
        "type": "object",
        "required": ["decision"],
        "properties": {
            "decision": {"enum": ["approve", "deny"]},
            "comment": {"type": "string", "maxLength": MAX_COMMENT_CHARS},
        },
    }
    query = [
        {"name": "status", "in": "query", "schema": {"enum": ["pending", "decided"]}},
        {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0}},
        {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_SIZE}},
    ]
    return {
        "/approvals": {
            "get": {
                "summary": "One page of the approval requests the caller may see",
                "security": _BEARER,
                "parameters": query,
                "responses": {
                    "200": {"description": "a page", "content": {"application/json": {"schema": listing}}},
                    "400": problem_response("a bad query parameter"),
                    **_REFUSALS,
                },
            }
        },
        "/approvals/{request_id}": {
            "get": {
                "summary": "One approval request",
                "security": _BEARER,
                "parameters": [_ID],
                "responses": {
                    "200": {"description": "the request", "content": {"application/json": {"schema": _RECORD}}},
                    "400": problem_response("a malformed id"),
                    "404": problem_response("no such request, or not visible to the caller"),
                    **_REFUSALS,
                },
            }
        },
        "/approvals/{request_id}/decide": {
            "post": {
                "summary": "Approve or deny a request",
                "security": _BEARER,
                "parameters": [_ID],
                "requestBody": {"required": True, "content": {"application/json": {"schema": decision}}},
                "responses": {
                    "200": {"description": "the decided request", "content": {"application/json": {"schema": _RECORD}}},
                    **{
                        str(status): problem_response(text)
                        for status, text in (
                            (400, "a bad body"),
                            (403, "the caller may not decide it"),
                            (404, "no such request"),
                            (409, "already decided, or changed meanwhile"),
                            (413, "body too large"),
                            (415, "not JSON"),
                        )
                    },
                    **_REFUSALS,
                },
            }
        },
    }


def console_paths(prefix: str = "/console") -> dict[str, Any]:
    """The console's pages and form endpoints under ``prefix`` (a session cookie signs reviewers in)."""
    page = {
        "200": {"description": "an HTML page", "content": _HTML},
        "303": {"description": "to the sign-in page"},
        **_UNREACHABLE_PAGE,
    }
    form_answers = {
        "200": {"description": "an HTML page", "content": _HTML},
        "303": {"description": "redirected"},
        "400": {"description": "a bad form", "content": _HTML},
        "401": {"description": "sign-in failed", "content": _HTML},
        "403": {"description": "no session or a wrong form token", "content": _HTML},
        "404": {"description": "no such request", "content": _HTML},
        "409": {"description": "already decided", "content": _HTML},
        "413": {"description": "form too large", "content": _HTML},
        "415": {"description": "not a form", "content": _HTML},
        "429": {"description": "throttled", "content": _HTML},
        **_UNREACHABLE_PAGE,
    }

    def form(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
        schema = {"type": "object", "properties": properties, "required": required}
        return {"required": True, "content": {"application/x-www-form-urlencoded": {"schema": schema}}}

    decide_form = form(
        {
            "csrf": {"type": "string"},
            "decision": {"enum": ["approve", "deny"]},
            "comment": {"type": "string", "maxLength": MAX_COMMENT_CHARS},
        },
        ["csrf", "decision"],
    )
    paging = [
        {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0}},
        {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_SIZE}},
    ]
    return {
        prefix: {"get": {"summary": "Pending requests", "parameters": paging, "responses": page}},
        f"{prefix}/decided": {"get": {"summary": "Decided requests", "parameters": paging, "responses": page}},
        f"{prefix}/requests/{{request_id}}": {
            "get": {"summary": "One request", "parameters": [_ID], "responses": {**page, **form_answers}}
        },
        f"{prefix}/requests/{{request_id}}/decide": {
            "post": {
                "summary": "Decide (form)",
                "parameters": [_ID],
                "requestBody": decide_form,
                "responses": form_answers,
            }
        },
        f"{prefix}/login": {
            "get": {"summary": "The sign-in page", "responses": page},
            "post": {
                "summary": "Sign in with a bearer token (form)",
                "requestBody": form({"token": {"type": "string"}, "csrf": {"type": "string"}}, ["token"]),
                "responses": form_answers,
            },
        },
        f"{prefix}/logout": {
            "post": {
                "summary": "Sign out (form)",
                "requestBody": form({"csrf": {"type": "string"}}, ["csrf"]),
                "responses": form_answers,
            }
        },
        f"{prefix}/static/console.css": {
            "get": {"summary": "The stylesheet", "responses": {"200": {"description": "CSS"}}}
        },
    }
