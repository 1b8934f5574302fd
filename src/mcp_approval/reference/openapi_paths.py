"""OpenAPI path items of the reference AuthZEN PDP and the ARAP Access Request Service
(see :mod:`mcp_approval.openapi`)."""

from __future__ import annotations

from typing import Any

from mcp_approval.openapi import problem_response
from mcp_approval.policy.http import EVALUATION_PATH, EVALUATIONS_PATH, WELL_KNOWN
from mcp_approval.reference.ars_routes import JWKS_PATH, REQUESTS_PATH

__all__ = ["ars_paths", "pdp_paths"]

_ENTITY = {
    "type": "object",
    "required": ["type", "id"],
    "properties": {"type": {"type": "string"}, "id": {"type": "string"}, "properties": {"type": "object"}},
}
_EVALUATION = {
    "type": "object",
    "required": ["subject", "action", "resource"],
    "properties": {
        "subject": _ENTITY,
        "action": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}},
        "resource": _ENTITY,
        "context": {"type": "object"},
    },
}
_DECISION = {"type": "object", "required": ["decision"], "properties": {"decision": {"type": "boolean"}}}
_JSON_ERRORS = {
    str(status): problem_response(text)
    for status, text in ((400, "not a valid request"), (413, "body too large"), (415, "not JSON"))
}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def pdp_paths(prefix: str = "") -> dict[str, Any]:
    """The PDP metadata and the AuthZEN evaluation endpoints under ``prefix``."""
    evaluations = {
        "type": "object",
        "properties": {
            **_EVALUATION["properties"],  # type: ignore[dict-item]
            "evaluations": {"type": "array", "items": {"type": "object"}},
            "options": {"type": "object"},
        },
    }
    return {
        WELL_KNOWN + prefix: {
            "get": {
                "summary": "The PDP's AuthZEN metadata",
                "responses": {"200": {"description": "metadata", "content": _json({"type": "object"})}},
            }
        },
        prefix + EVALUATION_PATH: {
            "post": {
                "summary": "Decide one access evaluation",
                "requestBody": {"required": True, "content": _json(_EVALUATION)},
                "responses": {"200": {"description": "the decision", "content": _json(_DECISION)}, **_JSON_ERRORS},
            }
        },
        prefix + EVALUATIONS_PATH: {
            "post": {
                "summary": "Decide several access evaluations",
                "requestBody": {"required": True, "content": _json(evaluations)},
                "responses": {
                    "200": {"description": "the decisions", "content": _json({"type": "object"})},
                    **_JSON_ERRORS,
                },
            }
        },
    }


def ars_paths(prefix: str = "") -> dict[str, Any]:
    """The Access Request Service (submit, status, cancel) and its JWKS under ``prefix``."""
    security: list[dict[str, list[str]]] = [{"bearer": []}]
    task_id = {"name": "task_id", "in": "path", "required": True, "schema": {"type": "string"}}
    submission = {
        "type": "object",
        "required": ["subject", "action", "resource", "denial"],
        "properties": {
            **_EVALUATION["properties"],  # type: ignore[dict-item]
            "denial": {"type": "object", "properties": {"expires_at": {"type": "string"}}},
            "callback": {"type": "object"},
        },
    }
    answers = {
        "200": {"description": "the request's status", "content": _json({"type": "object"})},
        **{
            str(status): problem_response(text)
            for status, text in (
                (400, "not a valid submission"),
                (401, "no valid client token"),
                (403, "not the caller's request"),
                (404, "no such request"),
                (409, "conflict"),
                (413, "body too large"),
                (415, "not JSON"),
                (422, "idempotency key reused with another body"),
                (429, "too many submissions, or failed authentications from this address (see Retry-After)"),
            )
        },
    }
    cancel = {"summary": "Cancel a request", "security": security, "parameters": [task_id], "responses": answers}
    return {
        prefix + REQUESTS_PATH: {
            "post": {
                "summary": "Submit an access request",
                "security": security,
                "parameters": [{"name": "Idempotency-Key", "in": "header", "schema": {"type": "string"}}],
                "requestBody": {"required": True, "content": _json(submission)},
                "responses": {**answers, "201": {"description": "accepted", "content": _json({"type": "object"})}},
            }
        },
        prefix + REQUESTS_PATH + "/{task_id}": {
            "get": {
                "summary": "A request's status",
                "security": security,
                "parameters": [task_id],
                "responses": answers,
            }
        },
        prefix + REQUESTS_PATH + "/{task_id}/cancel": {"post": cancel, "delete": cancel},
        prefix + JWKS_PATH: {
            "get": {
                "summary": "The keys approvals are signed with",
                "responses": {"200": {"description": "a JSON Web Key Set", "content": _json({"type": "object"})}},
            }
        },
    }
