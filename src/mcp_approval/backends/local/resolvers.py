"""Automatic resolvers: deciders the local backend asks before (or instead of) human reviewers.

A resolver is bound to one approval template. It sees the full submission and answers
``"approve"``, ``"deny"`` or ``None`` (leave the request to human reviewers). Its answer is
recorded like a reviewer's decision, under the reviewer name ``resolver:<template>``.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal, Protocol

from mcp_approval.backends.contract import ApprovalSubmission
from mcp_approval.backends.local.rules import ResolverRule

__all__ = ["AutoResolver", "CallableResolver", "ResolverFunction", "RuleResolver", "Verdict", "resolvers_from_config"]

Verdict = Literal["approve", "deny"]
#: A resolver function: sync or async, taking the submission, returning a verdict or ``None``.
ResolverFunction = Callable[[ApprovalSubmission], "Verdict | Awaitable[Verdict | None] | None"]


class AutoResolver(Protocol):
    """Decides requests of one template automatically.

    Attributes:
        template: the approval template whose requests it decides.
    """

    template: str

    async def decide(self, submission: ApprovalSubmission) -> Verdict | None:
        """``"approve"``, ``"deny"``, or ``None`` to leave the request to human reviewers."""
        ...


class RuleResolver:
    """Approves when ``arguments[argument]`` is a number from 0 to ``at_most``; denies otherwise.

    The rule reads an amount: a negative one (a refund that would take money back, say) is not
    "at most" anything it should approve, so it is denied like a missing one.
    """

    def __init__(self, template: str, argument: str, at_most: float) -> None:
        self.template = template
        self.argument = argument
        self.at_most = at_most

    async def decide(self, submission: ApprovalSubmission) -> Verdict | None:
        """Apply the rule; a missing, boolean, non-numeric, negative or non-finite argument is denied."""
        value = submission.arguments.get(self.argument)
        # bool is an int subclass; a flag is never an amount.
        if isinstance(value, bool) or not isinstance(value, int | float):
            return "deny"
        return "approve" if 0 <= value <= self.at_most else "deny"  # NaN fails both comparisons


class CallableResolver:
    """Delegates to a Python function, given directly or as ``"module:function"``.

    Raises:
        ValueError: the target is malformed, cannot be imported, or is not callable (naming it).
    """

    def __init__(self, template: str, target: str | ResolverFunction) -> None:
        self.template = template
        self._function = _load(target) if isinstance(target, str) else target

    async def decide(self, submission: ApprovalSubmission) -> Verdict | None:
        """Call the function (awaiting it if it is async) and check its answer."""
        answer = self._function(submission)
        if inspect.isawaitable(answer):
            answer = await answer
        if answer not in ("approve", "deny", None):
            raise ValueError(f"resolver for template {self.template!r} answered {answer!r}")
        return answer


def _load(target: str) -> ResolverFunction:
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"resolver callable {target!r}: expected 'module:function'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"resolver callable {target!r}: cannot import module {module_name!r} ({exc})") from exc
    function = getattr(module, attribute, None)
    if not callable(function):
        raise ValueError(f"resolver callable {target!r}: {module_name} has no callable {attribute!r}")
    return function  # type: ignore[no-any-return]


def resolvers_from_config(entries: Sequence[ResolverRule]) -> list[AutoResolver]:
    """The resolvers ``[[resolvers]]`` entries describe.

    Raises:
        ValueError: a callable resolver cannot be loaded.
    """
    resolvers: list[AutoResolver] = []
    for entry in entries:
        if entry.callable is not None:
            resolvers.append(CallableResolver(entry.template, entry.callable))
        else:
            # The config model guarantees a rule resolver has both fields.
            assert entry.approve_if_argument is not None
            assert entry.at_most is not None
            resolvers.append(RuleResolver(entry.template, entry.approve_if_argument, entry.at_most))
    return resolvers
