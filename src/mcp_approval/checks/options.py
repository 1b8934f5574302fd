"""What the operator tells the kit: the server, the gated call, two principals, the decider, the witness."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from mcp_approval.errors import MCPApprovalError

__all__ = [
    "COMMAND_VALUES",
    "CheckInputError",
    "CheckOptions",
    "ReviewDecider",
    "fill",
    "parse_arguments_template",
    "parse_command",
]

#: Replaced, inside every string of an arguments template, by a value fresh for each call, so that
#: no two calls of a run share a dedup scope and the witness can count each call's executions.
NONCE = "{nonce}"

#: The values a command may name as a word of its own (``{task_id}``); each is also in the
#: command's environment as ``MCP_CHECK_<NAME>``. Which apply depends on the command.
COMMAND_VALUES = ("action", "arguments", "comment", "decision", "nonce", "reviewer", "task_id", "token", "tool")
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


#: Decides the one pending request of a tool call on a deployment file, as ``mcp-approval review``
#: does: (config, tool, arguments, reviewer, decision, comment) -> the request id, or ``None`` when
#: none is pending; ``RuntimeError`` when the decision is refused. The command line supplies it.
ReviewDecider = Callable[[Path, str, Mapping[str, object], str, Literal["approve", "deny"], str], "str | None"]


class CheckInputError(MCPApprovalError):
    """Bad input to the kit (unreachable server, unknown tool, refused token, a failing decider): one line."""


@dataclass(frozen=True)
class CheckOptions:
    """One run of the kit.

    ``arguments`` and the other argument templates: ``{nonce}`` in any string is replaced by a
    value fresh for each call. ``decide_command`` (an argv template) or ``review_config`` with
    ``reviewer`` decide approval requests out of band; ``witness_tool`` (a tool called with no
    arguments) or ``witness_command`` show the gated tool's executions; ``policy_command``, when
    given, changes the server's policy between an approval and its execution.
    """

    url: str
    tool: str
    arguments: dict[str, Any]
    changed_arguments: dict[str, Any]
    token: str
    other_token: str
    decide_command: list[str] | None = None
    review_config: Path | None = None
    #: The principal that decides (with ``review_config``: required; with a command: optional, and
    #: then the approver identity no ``statusMessage`` may name).
    reviewer: str | None = None
    review_decider: ReviewDecider | None = None
    witness_tool: str | None = None
    witness_command: list[str] | None = None
    #: Makes the pending call's next evaluation deny, or revokes the principal, or undoes both.
    policy_command: list[str] | None = None
    #: A call of the tool that policy denies outright (no approval can lift it).
    denied_arguments: dict[str, Any] | None = None
    #: A gated call that, once approved, fails when the tool runs.
    failing_arguments: dict[str, Any] | None = None
    #: A principal's token that lacks the scope the call needs (a credential remedy, SEP-2643).
    underscoped_token: str | None = None
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
    #: The longest any one exchange, decision or wait may take.
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
        for option, template in self._templates():
            if NONCE not in json.dumps(template):
                raise CheckInputError(f"{option} must contain {NONCE} in a string value, so each call is distinct")
        if self.arguments == self.changed_arguments:
            raise CheckInputError("--changed-arguments must differ from --arguments")
        for option, argv in (
            ("--decide", self.decide_command),
            ("--witness-command", self.witness_command),
            ("--policy-command", self.policy_command),
        ):
            _check_placeholders(option, argv)
        if self.timeout_s <= 0 or self.settle_s < 0:
            raise CheckInputError("--timeout must be positive and --settle not negative")

    def _templates(self) -> list[tuple[str, dict[str, Any]]]:
        named: list[tuple[str, dict[str, Any] | None]] = [
            ("--arguments", self.arguments),
            ("--changed-arguments", self.changed_arguments),
        ]
        named += [("--denied-arguments", self.denied_arguments), ("--failing-arguments", self.failing_arguments)]
        return [(option, template) for option, template in named if template is not None]


def _check_placeholders(option: str, argv: list[str] | None) -> None:
    """A value may fill a word of its own only: never part of a longer word (such as a shell script)."""
    for word in argv or ():
        for name in _PLACEHOLDER.findall(word):
            if name not in COMMAND_VALUES:
                raise CheckInputError(f"{option}: unknown value {{{name}}} (known: {', '.join(COMMAND_VALUES)})")
            if word != f"{{{name}}}":
                raise CheckInputError(
                    f"{option}: {{{name}}} must be a word of its own, not inside {word!r}: values from the"
                    f" server go as separate arguments or as MCP_CHECK_{name.upper()}, never into a shell string"
                )


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
