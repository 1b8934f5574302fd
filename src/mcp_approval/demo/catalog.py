"""The demo's scenarios, in order: number, name, what should happen, and what each needs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from mcp_approval.demo import scenarios as basic
from mcp_approval.demo import scenarios_chat as chat
from mcp_approval.demo import scenarios_delegation as delegation
from mcp_approval.demo import scenarios_links as links
from mcp_approval.demo import scenarios_mail as mail
from mcp_approval.demo import scenarios_more as more
from mcp_approval.demo import scenarios_notify as notify
from mcp_approval.demo import scenarios_operators as operators
from mcp_approval.demo import scenarios_passkey as passkey
from mcp_approval.demo import scenarios_reminders as reminders
from mcp_approval.demo import scenarios_sign_in as sign_in
from mcp_approval.demo import scenarios_similar as similar
from mcp_approval.demo import scenarios_without_tasks as no_tasks
from mcp_approval.demo.context import Demo, ScenarioState
from mcp_approval.demo.services import NEED_ARAP, NEED_CREDENTIALS

__all__ = ["SCENARIOS", "Run", "ScenarioSpec"]

Run = Callable[[Demo, ScenarioState], Awaitable[str]]
"""A scenario: drives its calls, raises on the first expectation that fails, returns a one-line detail."""


@dataclass(frozen=True)
class ScenarioSpec:
    """One scenario of the catalog."""

    number: int
    name: str
    expectation: str
    run: Run
    needs: frozenset[str] = frozenset()


SCENARIOS: tuple[ScenarioSpec, ...] = (
    ScenarioSpec(1, "small transfer", "permitted: runs at once, no task", basic.small_transfer),
    ScenarioSpec(
        2, "approved transfer", "a task; carol approves; approved-executed, one entry", basic.approved_transfer
    ),
    ScenarioSpec(
        3,
        "denied transfer",
        "carol denies; denied-not-executed, and the reviewer API shows it did not run",
        basic.denied_transfer,
    ),
    ScenarioSpec(4, "automatic refund", "the refund rule approves within seconds", basic.automatic_refund),
    ScenarioSpec(5, "four eyes", "closing a quarter needs two distinct approvers", basic.four_eyes),
    ScenarioSpec(6, "cancel while pending", "cancelled before any decision; never executes", basic.cancel_pending),
    ScenarioSpec(7, "expiry", "nobody decides by the deadline; denied-not-executed", basic.expiry),
    ScenarioSpec(8, "crash and resume", "SIGKILL while pending; resumed by taskId", more.restart_while_pending),
    ScenarioSpec(
        9,
        "client without tasks: approved",
        "a request is opened; calling again waits on it; approved: the result, once",
        no_tasks.without_tasks_approved,
    ),
    ScenarioSpec(10, "url-mode approval", "the approval arrives as a url-mode elicitation", links.url_mode_approval),
    ScenarioSpec(
        11,
        "credential remediation",
        "SEP-2643: 403 insufficient_scope step-up, RAR authorization_details",
        more.credential_remediation,
        needs=frozenset({NEED_CREDENTIALS}),
    ),
    ScenarioSpec(
        12,
        "ARAP backend",
        "scenario 2 against the reference AuthZEN PDP + ARAP Access Request Service",
        links.arap_approval,
        needs=frozenset({NEED_ARAP}),
    ),
    ScenarioSpec(
        13,
        "client without tasks: denied",
        "carol denies; calling again answers denied-not-executed",
        no_tasks.without_tasks_denied,
    ),
    ScenarioSpec(
        14,
        "notifications",
        "a signed webhook tells the demo's receiver: requested, decided, approved, executed; "
        "the reviewer API shows approved-executed",
        notify.notified_transfer,
    ),
    ScenarioSpec(
        15,
        "client without tasks: requester page",
        "a url elicitation to the requester's page; the retry with its state: the result, once",
        no_tasks.url_without_tasks,
    ),
    ScenarioSpec(
        16,
        "operator metrics",
        "/metrics, parsed as Prometheus would: pending, decisions, executions and deliveries move",
        operators.metrics_move,
    ),
    ScenarioSpec(
        17,
        "Slack, interactive",
        "a quarter close posted to Slack; carol and dave click Approve there (signed, answered within 3 s); "
        "the message shows 1 of 2, then approved-executed",
        chat.decided_in_slack,
    ),
    ScenarioSpec(
        18,
        "Teams card",
        "an Adaptive Card reaches the Teams workflow; its button opens the request's console page; the last "
        "card says approved-executed",
        chat.teams_card,
    ),
    ScenarioSpec(
        19,
        "decide from e-mail",
        "carol's e-mail carries her own links; a scanner's GET decides nothing, her POST from the page "
        "approves once; approved-executed",
        mail.decided_from_email,
    ),
    ScenarioSpec(
        20,
        "nobody forgotten",
        "nobody answers an account deletion: the approvers are reminded after 2 s, treasurers told after 4 s; "
        "alice (treasurer) then approves; the request shows who was told when, on which channel",
        reminders.reminded_then_escalated,
    ),
    ScenarioSpec(
        21,
        "sign-in with the identity provider",
        "the request's page sends olivia to the issuer (code + PKCE) and back, signed in with her roles; she "
        "approves; pat, without the approver role, cannot decide",
        sign_in.signed_in_with_the_identity_provider,
    ),
    ScenarioSpec(
        22,
        "passkey step-up",
        "a vault account's closing needs carol's passkey: refused without it, approved with an assertion "
        "bound to the request and the decision, the replay refused; approved-executed",
        passkey.passkey_step_up,
    ),
    ScenarioSpec(
        23,
        "approve similar",
        "carol approves a transfer and calls like it (a sealed rule, 2 uses); the rule decides the next two, "
        "each its own request re-checked by policy; the fourth goes to carol",
        similar.approve_similar,
    ),
    ScenarioSpec(
        24,
        "delegation while away",
        "carol delegates the treasury template to erin for an hour; erin, no approver herself, approves alice's "
        "transfer for carol (the decision names both); carol revokes the delegation; approved-executed",
        delegation.delegated_while_away,
    ),
)
