"""Loading a :class:`~mcp_approval.policy.cedar.CedarPDP`: policies, schema and entities, checked up front.

Every problem is a :class:`~mcp_approval.policy.source.PolicyLoadError` naming the file and line.

Annotations (on ``forbid`` policies)
    - ``@requestable("template")``: the deny may be requested; the value is ``access_request.template``
      (``@requestable`` or ``@requestable("")``: requestable without a template).
    - ``@deadline("PT24H")``: ISO 8601 duration (weeks to seconds) after which the request hint
      expires: ``access_request.expires_at`` = decision time + deadline (default one hour).
    - ``@display("...")`` / ``@description("...")``: ``access_request.display.title`` / ``.description``.
    - ``@reason("code")``: ``context.reason`` of the deny. Without it, a requestable deny says
      ``approval_required``, and any other deny is a bare ``{"decision": false}`` (as the AuthZEN
      interop expects), except on re-evaluation, where it says ``policy_denied``.

    When several requestable forbids fire, the first in file order supplies template, display and
    reason, and the earliest deadline wins. ``@requestable``, ``@deadline``, ``@display`` and
    ``@description`` on a ``permit``, and the last three without ``@requestable``, fail loading.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

import cedarpy

from mcp_approval.policy.source import (
    LoadIssue,
    PolicyLoadError,
    Statement,
    TextSource,
    error_line,
    find_line,
    names_in_message,
    parse_duration,
    split_statements,
    statement_at_line,
)

__all__ = [
    "ANNOTATION_DEADLINE",
    "ANNOTATION_DESCRIPTION",
    "ANNOTATION_DISPLAY",
    "ANNOTATION_REASON",
    "ANNOTATION_REQUESTABLE",
    "PolicyInfo",
    "as_source",
    "entity_items",
    "load_entities",
    "load_policies",
    "load_schema",
]

ANNOTATION_REQUESTABLE: Final = "requestable"
ANNOTATION_DEADLINE: Final = "deadline"
ANNOTATION_DISPLAY: Final = "display"
ANNOTATION_DESCRIPTION: Final = "description"
ANNOTATION_REASON: Final = "reason"
_REQUESTABLE_ONLY = (ANNOTATION_DEADLINE, ANNOTATION_DISPLAY, ANNOTATION_DESCRIPTION)
_SYNTAX_MARKERS = ("unexpected token", "invalid token", "unexpected end of input", "unrecognized token")


@dataclass(frozen=True)
class PolicyInfo:
    """What the PDP knows about one policy of the set."""

    policy_id: str
    effect: str
    annotations: Mapping[str, str]
    deadline: timedelta | None

    @property
    def is_forbid(self) -> bool:
        """Whether this is a ``forbid`` policy."""
        return self.effect == "forbid"

    @property
    def requestable(self) -> bool:
        """Whether this policy carries ``@requestable``."""
        return ANNOTATION_REQUESTABLE in self.annotations

    @property
    def reason_annotated(self) -> bool:
        """Whether this policy names its deny reason with ``@reason``."""
        return bool(self.annotations.get(ANNOTATION_REASON))

    @property
    def order(self) -> int:
        """The policy's position in its file (Cedar's positional ids are ``policy<n>``)."""
        return int(self.policy_id[6:]) if re.fullmatch(r"policy\d+", self.policy_id) else 1 << 30

    def display(self) -> dict[str, str] | None:
        """``access_request.display`` from ``@display`` and ``@description``."""
        display: dict[str, str] = {}
        if self.annotations.get(ANNOTATION_DISPLAY):
            display["title"] = self.annotations[ANNOTATION_DISPLAY]
        if self.annotations.get(ANNOTATION_DESCRIPTION):
            display["description"] = self.annotations[ANNOTATION_DESCRIPTION]
        return display or None


def as_source(value: TextSource | str) -> TextSource:
    """``value`` as a :class:`TextSource` (a bare string is inline text)."""
    return value if isinstance(value, TextSource) else TextSource(value)


def _is_syntax_error(message: str) -> bool:
    return any(marker in message for marker in _SYNTAX_MARKERS)


def load_schema(source: TextSource) -> cedarpy.Schema:
    """Parse a Cedar schema, human-readable or JSON.

    Raises:
        PolicyLoadError: naming the source and line of the problem.
    """
    text = source.text
    is_json = text.lstrip().startswith("{")
    if is_json:
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            raise PolicyLoadError([LoadIssue(source.name, exc.lineno, f"invalid JSON: {exc.msg}")]) from exc
    try:
        return cedarpy.Schema.from_json_str(text) if is_json else cedarpy.Schema.from_str(text)
    except ValueError as exc:
        message = str(exc)
        line = None if is_json else error_line(text, cedarpy.Schema.from_str)
        if not _is_syntax_error(message):
            line = find_line(text, names_in_message(message)) or line
        raise PolicyLoadError([LoadIssue(source.name, line, f"invalid schema: {message}")]) from exc


def load_policies(
    source: TextSource, schema: cedarpy.Schema | None
) -> tuple[cedarpy.PolicySet, cedarpy.PolicySet, dict[str, PolicyInfo]]:
    """Parse and check the policies.

    Returns:
        Every policy; every policy except the ``@requestable`` forbids; each policy's info by id.

    Raises:
        PolicyLoadError: naming the source and line of each problem.
    """
    text = source.text
    statements = split_statements(text)
    try:
        policies = cedarpy.PolicySet.from_str(text)
    except ValueError as exc:
        raise PolicyLoadError([_parse_issue(source, statements, str(exc))]) from exc
    if schema is not None:
        _validate(source, statements, schema)
    est = json.loads(cedarpy.policies_to_json_str(text))
    info = _policy_info(source, statements, est)
    reduced = dict(est)
    reduced["staticPolicies"] = {
        pid: body
        for pid, body in est.get("staticPolicies", {}).items()
        if not (info[pid].is_forbid and info[pid].requestable)
    }
    return policies, cedarpy.PolicySet.from_json_str(json.dumps(reduced)), info


def _parse_issue(source: TextSource, statements: Sequence[Statement], message: str) -> LoadIssue:
    line = error_line(source.text, cedarpy.PolicySet.from_str)
    statement = statement_at_line(statements, line) if line is not None else None
    if statement is not None and not _is_syntax_error(message):
        nth = 2 if message.startswith("duplicate") else 1  # point at the repetition, not the original
        refined = find_line(source.text, names_in_message(message), statement.first_line, line, nth=nth)
        line = refined or statement.first_line
    policy = statement.describe() if statement is not None else None
    return LoadIssue(source.name, line, message, policy)


def _validate(source: TextSource, statements: Sequence[Statement], schema: cedarpy.Schema) -> None:
    result = cedarpy.validate_policies(source.text, schema)
    if result.validation_passed:
        return
    by_id = {statement.policy_id: statement for statement in statements}
    issues = []
    for error in result.errors:
        statement = by_id.get(error.policy_id)
        line = None
        if statement is not None:
            needles = names_in_message(error.error)
            line = find_line(source.text, needles, statement.first_line, statement.last_line) or statement.first_line
        policy = statement.describe() if statement is not None else error.policy_id or None
        issues.append(LoadIssue(source.name, line, f"does not match the schema: {error.error}", policy))
    raise PolicyLoadError(issues)


def _policy_info(source: TextSource, statements: Sequence[Statement], est: Mapping[str, Any]) -> dict[str, PolicyInfo]:
    by_id = {statement.policy_id: statement for statement in statements}
    info: dict[str, PolicyInfo] = {}
    issues: list[LoadIssue] = []
    bodies = {**est.get("templates", {}), **est.get("staticPolicies", {})}
    for pid, body in bodies.items():
        annotations = {str(k): "" if v is None else str(v) for k, v in (body.get("annotations") or {}).items()}
        statement = by_id.get(pid)
        problem, deadline = _annotation_problem(str(body.get("effect")), annotations)
        if problem is not None:
            name, detail = problem
            first, last = (statement.first_line, statement.last_line) if statement else (1, None)
            line = find_line(source.text, [f"@{name}"], first, last) or first
            issues.append(LoadIssue(source.name, line, detail, statement.describe() if statement else pid))
            continue
        info[pid] = PolicyInfo(pid, str(body.get("effect")), annotations, deadline)
    if issues:
        raise PolicyLoadError(issues)
    return info


def _annotation_problem(effect: str, annotations: Mapping[str, str]) -> tuple[tuple[str, str] | None, timedelta | None]:
    """``((annotation, message), None)`` for a misused annotation, else ``(None, deadline)``."""
    requestable = ANNOTATION_REQUESTABLE in annotations
    if requestable and effect != "forbid":
        return (ANNOTATION_REQUESTABLE, "@requestable applies to forbid policies only"), None
    for name in _REQUESTABLE_ONLY:
        if name in annotations and not requestable:
            return (name, f"@{name} needs @requestable on the same policy"), None
    if ANNOTATION_DEADLINE not in annotations:
        return None, None
    try:
        return None, parse_duration(annotations[ANNOTATION_DEADLINE])
    except ValueError as exc:
        return (ANNOTATION_DEADLINE, f"@deadline: {exc}"), None


def load_entities(
    source: TextSource, schema: cedarpy.Schema | None
) -> tuple[dict[tuple[str, str], dict[str, Any]], cedarpy.Entities]:
    """Parse the entities file: the stored entities by ``(type, id)`` and the Cedar ``Entities``.

    Raises:
        PolicyLoadError: naming the source and line of each problem.
    """
    items = entity_items(source)
    stored: dict[tuple[str, str], dict[str, Any]] = {}
    for line, entity in items:
        stored[_entity_key(source, line, entity)] = {
            "uid": entity["uid"],
            "attrs": entity.get("attrs") or {},
            "parents": entity.get("parents") or [],
            **{k: v for k, v in entity.items() if k not in {"uid", "attrs", "parents"}},
        }
    try:
        return stored, cedarpy.Entities.from_json_str(source.text, schema)
    except ValueError as exc:
        raise PolicyLoadError([_entity_issue(source, items, schema, str(exc))]) from exc


def entity_items(source: TextSource) -> list[tuple[int, dict[str, Any]]]:
    """The entities of a JSON list, each with the line it starts on."""
    text = source.text
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PolicyLoadError([LoadIssue(source.name, exc.lineno, f"invalid JSON: {exc.msg}")]) from exc
    if not isinstance(document, list):
        raise PolicyLoadError([LoadIssue(source.name, 1, "the entities file must hold a JSON list of entities")])
    decoder = json.JSONDecoder()
    offset = text.index("[") + 1
    items: list[tuple[int, dict[str, Any]]] = []
    for _ in document:
        while text[offset] in " \t\r\n,":
            offset += 1
        value, end = decoder.raw_decode(text, offset)
        line = text.count("\n", 0, offset) + 1
        if not isinstance(value, dict):
            raise PolicyLoadError([LoadIssue(source.name, line, "each entity must be a JSON object")])
        items.append((line, value))
        offset = end
    return items


def _entity_key(source: TextSource, line: int, entity: Mapping[str, Any]) -> tuple[str, str]:
    uid = entity.get("uid")
    if not isinstance(uid, dict) or not isinstance(uid.get("type"), str) or not isinstance(uid.get("id"), str):
        raise PolicyLoadError([LoadIssue(source.name, line, 'an entity needs "uid": {"type": ..., "id": ...}')])
    return uid["type"], uid["id"]


def _entity_issue(
    source: TextSource, items: Sequence[tuple[int, dict[str, Any]]], schema: cedarpy.Schema | None, message: str
) -> LoadIssue:
    """Find the entity Cedar refused by loading them one at a time."""
    for line, entity in items:
        uid = entity["uid"]
        name = f'{uid["type"]}::"{uid["id"]}"'
        try:
            cedarpy.Entities.from_json_str(json.dumps([entity]))
        except ValueError as exc:
            return LoadIssue(source.name, line, f"entity {name} is malformed: {exc}")
        if schema is None:
            continue
        try:
            cedarpy.Entities.from_json_str(json.dumps([entity]), schema)
        except ValueError as exc:
            detail = f"does not match the schema (undeclared type, or attributes of the wrong shape): {exc}"
            return LoadIssue(source.name, line, f"entity {name} {detail}")
    return LoadIssue(source.name, None, f"invalid entities: {message}")
