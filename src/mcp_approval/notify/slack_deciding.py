"""Turning a verified Slack click into a reviewer's decision, by the same path the console takes.

A click names a Slack user, a request and the message it was made on. :class:`SlackDecider`
maps the user to a reviewer (the channel's ``reviewers``, or with ``match_email`` the confirmed
e-mail address ``users.info`` gives), checks that the message is the one this channel posted
about that request, and calls the backend's ``decide`` as that reviewer: the template's role,
N-of-M, no self-approval and sealed decisions hold as they do in the console. What happened is
told to the clicking user alone (:data:`Reply`). It runs after Slack got its answer, so a store
that is down or slow costs Slack nothing: the user is then told nothing was recorded, or, when
the store lost only its answer, what a second look at the request shows.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from mcp_approval.backends import (
    ApprovalRecord,
    NotEligibleError,
    ReviewError,
    SimilarRuleError,
    SimilarRuleSpec,
    SupportsReview,
    SupportsSimilarRules,
)
from mcp_approval.backends.contract import UnknownRequestError
from mcp_approval.clock import iso8601
from mcp_approval.notify.chat_messages import ChatMessage, ChatMessages
from mcp_approval.reviewers.views import RequestView
from mcp_approval.storage.errors import StoreUnavailableError

__all__ = ["NOT_RECORDED", "UNCONFIRMED", "Click", "Reply", "SlackDecider", "outcome_text"]

_log = logging.getLogger(__name__)

Reply = Callable[[str], Awaitable[None]]
"""Tells the clicking user something only they see (an ephemeral message)."""

#: What the user is told when the store could not record their decision.
NOT_RECORDED = "Nothing was recorded: the approval store could not be reached. Try again in a moment."
#: ... and when it stopped answering mid-decision and a second look failed too.
UNCONFIRMED = (
    "Your decision may not have been recorded: the approval store stopped answering. Try again in a "
    "moment; if it was recorded, you will be told that you already decided."
)
_UNMAPPED = "Nothing was recorded: your Slack account is not mapped to a reviewer of these requests."
_NOT_THIS_MESSAGE = "Nothing was recorded: this message is not the one this request was posted as."
#: The pauses before each second look at a request whose decision the store did not confirm (8 s in all).
_SECOND_LOOKS = (0.5, 1.5, 2.0, 4.0)
_NO_LOOKUP = "Nothing was recorded: your Slack account could not be looked up. Try again in a moment."


@dataclass(frozen=True)
class Click:
    """A verified click: who (Slack user id), on which request, on which message (conversation, ``ts``)."""

    user: str
    request_id: str
    where: ChatMessage


def outcome_text(record: ApprovalRecord, verdict: Literal["approve", "deny"]) -> str:
    """What a recorded decision did, for the user who made it."""
    status = record.status.value
    if status == "approved":
        return "Recorded: approved. The call is checked against policy once more and then runs."
    if status == "denied":
        return "Recorded: denied. The call will not run."
    progress = RequestView(record, 0).progress
    return f"Recorded: your {'approval' if verdict == 'approve' else 'denial'} ({progress}); waiting for others."


class SlackDecider:
    """Decides clicks of one Slack channel's messages.

    Args:
        backend: the backend whose ``decide`` records the decision.
        messages: the channel's posted messages (a click must be on its request's message).
        client: the Web API client (``users.info`` for ``match_email``).
        reviewers: Slack user id -> reviewer id.
        match_email: whether an unlisted user decides as their confirmed e-mail address.
    """

    def __init__(
        self,
        backend: SupportsReview,
        messages: ChatMessages,
        client: AsyncWebClient,
        reviewers: Mapping[str, str],
        *,
        match_email: bool = False,
    ) -> None:
        self._backend = backend
        self._messages = messages
        self._client = client
        self._reviewers = dict(reviewers)
        self._match_email = match_email

    async def decide(
        self, click: Click, verdict: Literal["approve", "deny"], comment: str | None, reply: Reply
    ) -> None:
        """Record ``click``'s decision and tell the user what happened (never raises)."""
        reviewer = await self._allowed(click, reply)
        if reviewer is None:
            return
        try:
            record = await self._backend.decide(click.request_id, reviewer, verdict, comment)
        except UnknownRequestError:
            await reply("Nothing was recorded: there is no such request.")
        except NotEligibleError as exc:
            await reply(f"Nothing was recorded: you may not decide this request ({exc}).")
        except ReviewError as exc:  # already decided, expired, kept changing, altered
            await reply(f"Nothing was recorded: {exc}.")
        except StoreUnavailableError:
            await reply(await self._second_look(click.request_id, reviewer))
        else:
            await reply(outcome_text(record, verdict))

    async def similar_limits(self, click: Click, reply: Reply) -> tuple[ApprovalRecord, tuple[float, int]] | None:
        """The request ``click`` names and the limits of a rule its user may write approving it, or
        ``None`` (told why) when they may not decide it or its template allows no rule."""
        if not await self.may_deny(click, reply):
            return None
        backend = self._backend
        try:
            record = await backend.get_request(click.request_id)
        except StoreUnavailableError:
            await reply(NOT_RECORDED)
            return None
        limits = None
        if record is not None and isinstance(backend, SupportsSimilarRules):
            limits = backend.similar_rule_limits(record)
        if record is None or limits is None:
            await reply("This request's template allows no similar-call rule; approve it on its own.")
            return None
        return record, limits

    async def approve_similar(self, click: Click, spec: SimilarRuleSpec, comment: str | None, reply: Reply) -> None:
        """Approve ``click``'s request with the similar-call rule ``spec`` and tell the user (never raises)."""
        reviewer = await self._allowed(click, reply)
        if reviewer is None:
            return
        backend = self._backend
        if not isinstance(backend, SupportsSimilarRules):
            await reply("Nothing was recorded: this approval backend keeps no similar-call rules.")
            return
        try:
            record, rule = await backend.approve_similar(click.request_id, reviewer, spec, comment)
        except UnknownRequestError:
            await reply("Nothing was recorded: there is no such request.")
        except NotEligibleError as exc:
            await reply(f"Nothing was recorded: you may not decide this request ({exc}).")
        except (SimilarRuleError, ReviewError) as exc:
            await reply(f"Nothing was recorded: {exc}.")
        except StoreUnavailableError:
            await reply(await self._second_look(click.request_id, reviewer))
        else:
            until = iso8601(rule.expires_at)[:16].replace("T", " ")
            text = f"{outcome_text(record, 'approve')} Rule {rule.id} approves up to {rule.max_uses} similar calls"
            await reply(f"{text} until {until} UTC (revoke it in the console or the reviewer API).")

    async def may_deny(self, click: Click, reply: Reply) -> bool:
        """Whether the user may decide ``click``'s request, told to them if not (before the deny dialog opens)."""
        reviewer = await self._allowed(click, reply)
        if reviewer is None:
            return False
        try:
            record = await self._backend.get_request(click.request_id)
        except StoreUnavailableError:
            await reply(NOT_RECORDED)
            return False
        refusal = "there is no such request" if record is None else self._backend.why_ineligible(reviewer, record)
        if refusal is not None:
            await reply(f"You may not decide this request ({refusal}).")
            return False
        return True

    async def _allowed(self, click: Click, reply: Reply) -> str | None:
        """The reviewer ``click`` decides as, once its message checks out; ``None`` (told) otherwise."""
        try:
            reviewer = await self.reviewer_of(click.user)
        except SlackApiError as exc:
            _log.warning("slack: users.info failed for a click: %s", exc.response.get("error"))
            await reply(_NO_LOOKUP)
            return None
        if reviewer is None:
            await reply(_UNMAPPED)
            return None
        try:
            posted = await self._messages.find(click.request_id)
        except StoreUnavailableError:
            await reply(NOT_RECORDED)
            return None
        if posted != click.where:
            _log.warning("slack: a click on request %s… came from another message", click.request_id[:8])
            await reply(_NOT_THIS_MESSAGE)
            return None
        return reviewer

    async def reviewer_of(self, user: str) -> str | None:
        """The reviewer Slack user ``user`` is, or ``None``.

        Raises:
            SlackApiError: ``users.info`` failed (with ``match_email`` only).
        """
        mapped = self._reviewers.get(user)
        if mapped is not None or not self._match_email:
            return mapped
        answer = await self._client.users_info(user=user)
        found = answer.get("user")
        if not isinstance(found, dict) or any(
            found.get(flag) for flag in ("deleted", "is_bot", "is_app_user", "is_restricted", "is_ultra_restricted")
        ):
            return None
        profile = found.get("profile")
        email = profile.get("email") if isinstance(profile, dict) else None
        if found.get("is_email_confirmed") is not True or not isinstance(email, str) or "@" not in email:
            return None
        return email.strip().lower()

    async def _second_look(self, request_id: str, reviewer: str) -> str:
        """After the store failed mid-decision: whether the decision is there after all (the store may
        have lost only its answer). Looked for up to four times over 8 s, as outages are often brief."""
        record: ApprovalRecord | None = None
        for pause in _SECOND_LOOKS:
            await asyncio.sleep(pause)
            try:
                record = await self._backend.get_request(request_id)
                break
            except StoreUnavailableError:
                continue
        else:
            return UNCONFIRMED
        mine = [d for d in record.decisions if d.reviewer == reviewer] if record is not None else []
        if not mine:
            return NOT_RECORDED
        assert record is not None
        return outcome_text(record, "approve" if mine[0].decision == "approve" else "deny")
