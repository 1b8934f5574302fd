"""OpenAPI path items of the reviewer API and the reviewer console (see :mod:`mcp_approval.openapi`)."""

from __future__ import annotations

from typing import Any

from mcp_approval.openapi import problem_response
from mcp_approval.reviewers.limits import MAX_BATCH_SIZE, MAX_COMMENT_CHARS, MAX_PAGE_SIZE

__all__ = ["console_paths", "reviewer_paths"]

_BEARER: list[dict[str, list[str]]] = [{"bearer": []}]
_ID = {
    "name": "request_id",
    "in": "path",
    "required": True,
    "description": "the request's id, or the reference its requester was given (the task's id)",
    "schema": {"type": "string"},
}
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
            "similar": _SIMILAR,
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
        **_batch_and_rule_paths(),
        **_delegation_paths(),
    }


#: A similar-call rule written with an approval (see :class:`~mcp_approval.backends.SimilarRuleSpec`).
_SIMILAR = {
    "type": "object",
    "required": ["expires_in_s", "max_uses"],
    "properties": {
        "expires_in_s": {"type": "number", "exclusiveMinimum": 0},
        "max_uses": {"type": "integer", "minimum": 1},
        "principal": {"enum": ["same", "any"]},
        "arguments": {
            "type": "object",
            "description": 'argument -> {"equal": v} | {"one_of": [..]} | {"range": [lo, hi]} | {"prefix": "s"}',
            "additionalProperties": {"type": "object"},
        },
    },
}
_RULE = {"type": "object", "required": ["id", "state", "author", "expires_at", "max_uses", "uses"]}
_RULE_ID = {"name": "rule_id", "in": "path", "required": True, "schema": {"type": "string"}}


def _answers(ok: str, schema: dict[str, Any], *refusals: tuple[int, str]) -> dict[str, Any]:
    ok_answer = {"description": ok, "content": {"application/json": {"schema": schema}}}
    return {"200": ok_answer, **{str(code): problem_response(text) for code, text in refusals}, **_REFUSALS}


def _batch_and_rule_paths() -> dict[str, Any]:
    """``/approvals/decide`` (several requests at once) and ``/similar-rules``."""
    batch = {
        "type": "object",
        "required": ["ids", "decision"],
        "properties": {
            "ids": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": MAX_BATCH_SIZE},
            "decision": {"enum": ["approve", "deny"]},
            "comment": {"type": "string", "maxLength": MAX_COMMENT_CHARS},
        },
    }
    results = {"type": "object", "required": ["decided", "results"]}
    bad_body = ((400, "a bad body"), (413, "body too large"), (415, "not JSON"))
    return {
        "/approvals/decide": {
            "post": {
                "summary": "Decide several requests, each on its own; which succeeded and why any did not",
                "security": _BEARER,
                "requestBody": {"required": True, "content": {"application/json": {"schema": batch}}},
                "responses": _answers("one result per id", results, *bad_body),
            }
        },
        "/similar-rules": {
            "get": {
                "summary": "The similar-call rules the caller may see",
                "security": _BEARER,
                "parameters": [{"name": "state", "in": "query", "schema": {"enum": ["active", "all"]}}],
                "responses": _answers("the rules", {"type": "object", "required": ["rules"]}, (400, "no rules here")),
            }
        },
        "/similar-rules/{rule_id}": {
            "get": {
                "summary": "One similar-call rule",
                "security": _BEARER,
                "parameters": [_RULE_ID],
                "responses": _answers("the rule", _RULE, (400, "no rules here"), (404, "no such rule")),
            }
        },
        "/similar-rules/{rule_id}/revoke": {
            "post": {
                "summary": "Revoke a similar-call rule at once",
                "security": _BEARER,
                "parameters": [_RULE_ID],
                "responses": _answers(
                    "the revoked rule",
                    _RULE,
                    (400, "no rules here"),
                    (403, "the caller may not revoke it"),
                    (404, "no such rule"),
                    (409, "already revoked"),
                ),
            }
        },
    }


def _delegation_paths() -> dict[str, Any]:
    """``/delegations`` and its ``/revoke``."""
    delegation = {
        "type": "object",
        "required": ["id", "state", "delegator", "delegate", "template", "starts_at", "ends_at"],
        "properties": {
            "state": {"enum": ["active", "scheduled", "revoked", "expired", "integrity failure"]},
            "starts_at": {"type": "string", "format": "date-time"},
            "ends_at": {"type": "string", "format": "date-time"},
        },
    }
    asked = {
        "type": "object",
        "required": ["delegate", "template", "duration_s"],
        "properties": {
            "delegate": {"type": "string"},
            "template": {"type": "string"},
            "duration_s": {"type": "number", "exclusiveMinimum": 0},
        },
    }
    made = {"description": "the delegation", "content": {"application/json": {"schema": delegation}}}
    refusals = ((400, "a bad body, or the template's rules refuse it"), (403, "the caller holds no role to delegate"))
    created = {**_answers("", delegation, *refusals, (413, "body too large"), (415, "not JSON"))}
    del created["200"]
    identifier = {"name": "delegation_id", "in": "path", "required": True, "schema": {"type": "string"}}
    return {
        "/delegations": {
            "get": {
                "summary": "The delegations the caller made or received",
                "security": _BEARER,
                "parameters": [{"name": "state", "in": "query", "schema": {"enum": ["active", "all"]}}],
                "responses": _answers("the delegations", {"type": "object", "required": ["delegations"]}),
            },
            "post": {
                "summary": "Hand the caller's role for a template to another reviewer for a period",
                "security": _BEARER,
                "requestBody": {"required": True, "content": {"application/json": {"schema": asked}}},
                "responses": {"201": made, **created},
            },
        },
        "/delegations/{delegation_id}/revoke": {
            "post": {
                "summary": "Revoke a delegation at once (its delegator may)",
                "security": _BEARER,
                "parameters": [identifier],
                "responses": _answers(
                    "the revoked delegation",
                    delegation,
                    (403, "the caller is not its delegator"),
                    (404, "no such delegation"),
                    (409, "already revoked"),
                ),
            }
        },
    }


def console_paths(prefix: str = "/console", *, oidc: bool = False) -> dict[str, Any]:
    """The console's pages and form endpoints under ``prefix`` (a session cookie signs reviewers in);
    with ``oidc``, the sign-in with an OpenID Connect provider too."""
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
    similar_form = form(
        {
            "csrf": {"type": "string"},
            "principal": {"enum": ["same", "any"]},
            "expires_in": {"type": "string"},
            "unit": {"enum": ["minutes", "hours", "days"]},
            "max_uses": {"type": "string"},
            "comment": {"type": "string", "maxLength": MAX_COMMENT_CHARS},
        },
        ["csrf", "expires_in", "unit", "max_uses"],
    )
    paging = [
        {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0}},
        {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_SIZE}},
    ]
    search = [{"name": "q", "in": "query", "schema": {"type": "string", "maxLength": 512}}]
    oidc_paths = {
        f"{prefix}/oidc/start": {
            "get": {
                "summary": "Sign in with the identity provider (redirects to it)",
                "parameters": [{"name": "next", "in": "query", "schema": {"type": "string"}}],
                "responses": {
                    "303": {"description": "to the provider"},
                    "502": {"description": "the provider is unreachable", "content": _HTML},
                },
            }
        },
        f"{prefix}/oidc/callback": {
            "get": {
                "summary": "Where the identity provider sends the reviewer back",
                "parameters": [
                    {"name": name, "in": "query", "schema": {"type": "string"}} for name in ("code", "state", "error")
                ],
                "responses": {
                    "200": {"description": "signed in: a page that moves on to the console", "content": _HTML},
                    "400": {"description": "no sign-in under way, or another state", "content": _HTML},
                    "401": {"description": "the provider or the ID token refused", "content": _HTML},
                },
            }
        },
    }
    return {
        **(oidc_paths if oidc else {}),
        prefix: {"get": {"summary": "Pending requests", "parameters": paging, "responses": page}},
        f"{prefix}/find": {
            "get": {
                "summary": "Find a request by its id or its requester's reference",
                "parameters": search,
                "responses": {**page, "404": {"description": "no such request visible", "content": _HTML}},
            }
        },
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
        f"{prefix}/requests/{{request_id}}/similar": {
            "post": {
                "summary": "Approve, and write a similar-call rule (form: principal, a<i> conditions, expiry, uses)",
                "parameters": [_ID],
                "requestBody": similar_form,
                "responses": form_answers,
            }
        },
        f"{prefix}/decide": {
            "post": {
                "summary": "Decide the selected pending requests, each on its own (form: id.<n> fields)",
                "requestBody": decide_form,
                "responses": form_answers,
            }
        },
        f"{prefix}/rules": {
            "get": {
                "summary": "The similar-call rules the reviewer may see (active, or all with state=all)",
                "parameters": [{"name": "state", "in": "query", "schema": {"enum": ["active", "all"]}}],
                "responses": page,
            }
        },
        f"{prefix}/rules/{{rule_id}}": {
            "get": {
                "summary": "One similar-call rule and the calls it decided",
                "parameters": [_RULE_ID],
                "responses": {**page, "404": {"description": "no such rule visible", "content": _HTML}},
            }
        },
        f"{prefix}/rules/{{rule_id}}/revoke": {
            "post": {
                "summary": "Revoke a similar-call rule at once (form)",
                "parameters": [_RULE_ID],
                "requestBody": form({"csrf": {"type": "string"}}, ["csrf"]),
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
        f"{prefix}/delegations": {
            "get": {"summary": "The reviewer's delegations, and a form to delegate", "responses": page},
            "post": {
                "summary": "Delegate your role for a template for some hours (form)",
                "requestBody": form(
                    {
                        "csrf": {"type": "string"},
                        "delegate": {"type": "string"},
                        "template": {"type": "string"},
                        "hours": {"type": "string"},
                    },
                    ["csrf", "delegate", "template", "hours"],
                ),
                "responses": form_answers,
            },
        },
        f"{prefix}/delegations/{{delegation_id}}/revoke": {
            "post": {
                "summary": "Revoke one of your delegations (form)",
                "parameters": [{"name": "delegation_id", "in": "path", "required": True, "schema": {"type": "string"}}],
                "requestBody": form({"csrf": {"type": "string"}}, ["csrf"]),
                "responses": form_answers,
            }
        },
    }
