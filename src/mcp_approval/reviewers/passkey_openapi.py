"""OpenAPI path items of the passkey routes (:mod:`~mcp_approval.reviewers.passkey_routes`)."""

from __future__ import annotations

from typing import Any

from mcp_approval.openapi import problem_response
from mcp_approval.reviewers.limits import MAX_COMMENT_CHARS

__all__ = ["passkey_paths"]

_ID = {"name": "request_id", "in": "path", "required": True, "schema": {"type": "string"}}
_HTML = {"text/html": {"schema": {"type": "string"}}}
_JSON_OBJECT = {"application/json": {"schema": {"type": "object"}}}
_CREDENTIAL = {"type": "object", "description": "a WebAuthn PublicKeyCredential as JSON (base64url members)"}


def passkey_paths(prefix: str = "/console") -> dict[str, Any]:
    """The passkey pages and ceremonies of the console under ``prefix``, and of the reviewer API."""
    refusals = {
        str(status): problem_response(text)
        for status, text in (
            (400, "a bad body, or a registration refused"),
            (401, "no session or no valid token"),
            (403, "refused: not a reviewer of it, a wrong CSRF token, or the passkey assertion refused"),
            (404, "no such request"),
            (409, "already decided, expired, or changed meanwhile"),
            (413, "body too large"),
            (415, "not JSON"),
            (429, "throttled"),
            (503, "the store is unreachable: try again"),
        )
    }
    decision = {"type": "object", "required": ["decision"], "properties": {"decision": {"enum": ["approve", "deny"]}}}
    decide = {
        "type": "object",
        "required": ["decision", "credential"],
        "properties": {
            "decision": {"enum": ["approve", "deny"]},
            "comment": {"type": "string", "maxLength": MAX_COMMENT_CHARS},
            "credential": _CREDENTIAL,
        },
    }

    def post(summary: str, body: dict[str, Any], answer: str, *, path_id: bool = True) -> dict[str, Any]:
        operation: dict[str, Any] = {
            "summary": summary,
            "requestBody": {"required": True, "content": {"application/json": {"schema": body}}},
            "responses": {"200": {"description": answer, "content": _JSON_OBJECT}, **refusals},
        }
        if path_id:
            operation["parameters"] = [_ID]
        return {"post": operation}

    page = {"200": {"description": "an HTML page", "content": _HTML}, "303": {"description": "to the sign-in page"}}
    request_page = f"{prefix}/requests/{{request_id}}/passkey"
    bearer: list[dict[str, list[str]]] = [{"bearer": []}]
    api_options = post("WebAuthn request options for one decision", decision, "the options")
    api_decide = post("Decide with a passkey assertion", decide, "the decided request")
    api_options["post"]["security"] = bearer
    api_decide["post"]["security"] = bearer
    return {
        f"{prefix}/passkeys": {
            "get": {"summary": "The reviewer's passkeys", "responses": page},
            **post("Register a passkey", {"type": "object", "required": ["credential"]}, "registered", path_id=False),
        },
        f"{prefix}/passkeys/options": post(
            "WebAuthn creation options", {"type": "object"}, "the options", path_id=False
        ),
        request_page: {"get": {"summary": "Decide with a passkey (page)", "parameters": [_ID], "responses": page}},
        f"{request_page}/options": post("WebAuthn request options for one decision", decision, "the options"),
        f"{request_page}/decide": post("Decide with a passkey assertion", decide, "the outcome and where to go"),
        f"{prefix}/static/passkey.js": {
            "get": {"summary": "The passkey script", "responses": {"200": {"description": "JavaScript"}}}
        },
        "/approvals/{request_id}/passkey/options": api_options,
        "/approvals/{request_id}/passkey/decide": api_decide,
    }
