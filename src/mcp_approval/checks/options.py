"""What the operator tells the kit: the server, the gated call, two principals, the decider, the witness."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = ["CheckInputError", "CheckOptions", "ReviewDecider", "parse_arguments_template", "parse_command"]

#: Replaced, inside every string of an arguments template, by a value fresh for each call, so that
#: no two calls of a run share a dedup scope and the witness can count each call's executions.
NONCE = "{nonce}"


#: Decides the one pending request of a tool call on a deployment file, as ``mcp-approval review``
#: does: (config, tool, arguments, reviewer, decision) -> the request id, or ``None`` when none is
#: pending; ``RuntimeError`` when the decision is refused. The command line supplies it.
ReviewDecider = Callable[[Path, str, Mapping[str, object], str, Literal["approve", "deny"]], "str | None"]


class CheckInputError(Exception):
    """Bad input to the kit (unreachable server, unknown tool, refused token): one line for the operator."""


@dataclass(frozen=True)
class CheckOptions:
    """One run of the kit.

    ``arguments`` and ``changed_arguments`` are templates: ``{nonce}`` in any string is replaced
    by a value fresh for each call. ``decide_command`` (an argv template) or ``review_config``
    with ``reviewer`` decide approval requests out of band; ``witness_tool`` (a tool called with no
    arguments) or ``witness_command`` show the gated tool's effects, in which the kit counts the nonce.
    """

    url: str
    tool: str
    arguments: dict[str, Any]
    changed_arguments: dict[str, Any]
    token: str
    other_token: str
    decide_command: list[str] | None = None
    review_config: Path | None = None
    reviewer: str | None = None
    review_decider: ReviewDecider | None = None
    witness_tool: str | None = None
    witness_command: list[str] | None = None
    #: The gated call asks for submission input (through the task input channel, per SEP-2848).
    expects_input: bool = False
    #: Content for every form the server asks for; without it, required string fields get a sentence.
    input_answer: dict[str, Any] | None = None
    #: Strings that are backend artifacts and must never reach the client (e.g. the backend's URL).
    backend_artifacts: tuple[str, ...] = ()
    only: frozenset[str] | None = None
    #: The gated call's approval request expires this many seconds after it opens (the server is
    #: configured so): the expiry scenario runs only when it is given.
    expires_within_s: float | None = None
    #: How long to watch a task that must not execute (after a cancel, a denial, a changed call).
    settle_s: float = 2.0
    timeout_s: float = 30.0
    extra_headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.token == self.other_token:
            raise CheckInputError("--token and --other-token must be two principals' tokens, not the same one")
        if (self.decide_command is None) == (self.review_config is None):
            raise CheckInputError("give exactly one decider: --decide 'COMMAND' or --review-config FILE --reviewer ID")
        if self.review_config is not None and not self.reviewer:
            raise CheckInputError("--review-config needs --reviewer (the principal id that decides)")
        if self.review_config is not None and self.review_decider is None:
            raise CheckInputError("--review-config needs the review decider of the command line")
        if self.review_config is not None and not self.review_config.is_file():
            raise CheckInputError(f"--review-config {self.review_config}: no such file")
        if (self.witness_tool is None) == (self.witness_command is None):
            raise CheckInputError("give exactly one witness: --witness-tool NAME or --witness-command 'COMMAND'")
        for name, template in (("--arguments", self.arguments), ("--changed-arguments", self.changed_arguments)):
            if NONCE not in json.dumps(template):
                raise CheckInputError(f"{name} must contain {NONCE} in a string value, so each call is distinct")
        if self.arguments == self.changed_arguments:
            raise CheckInputError("--changed-arguments must differ from --arguments")


def parse_arguments_template(text: str, option: str) -> dict[str, Any]:
    """A JSON object given on the command line, or :class:`CheckInputError` in one line."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CheckInputError(f"{option} is not JSON: {exc.msg} at column {exc.colno}") from None
    if not isinstance(value, dict):
        raise CheckInputError(f"{option} must be a JSON object, not {type(value).__name__}")
    return value


def parse_command(text: str, option: str) -> list[str]:
    """A command line (split as a POSIX shell would, but run without one)."""
    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise CheckInputError(f"{option}: {exc}") from None
    if not argv:
        raise CheckInputError(f"{option} is empty")
    return argv


def fill(template: Any, nonce: str) -> Any:
    """``template`` with ``{nonce}`` replaced in every string."""
    if isinstance(template, str):
        return template.replace(NONCE, nonce)
    if isinstance(template, dict):
        return {key: fill(value, nonce) for key, value in template.items()}
    if isinstance(template, list):
        return [fill(item, nonce) for item in template]
    return template
