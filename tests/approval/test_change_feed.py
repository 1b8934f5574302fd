"""The workflow driver follows the local backend's change feed instead of polling every pending request.

A decision recorded through a second backend instance (as another process or the review CLI
would record it) reaches the task within a driver pass although the server polls pending
requests only every 30 s; a request still pending is then looked at again only after
``fallback_poll_interval_s``, so a pass costs what changed, not what is pending.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.approval.inprocess import inprocess_treasury
from tests.approval.test_callbacks import decide_elsewhere
from tests.support.polling import eventually
from tests.treasury.helpers import assert_approved_executed, settled

pytestmark = pytest.mark.anyio


async def test_a_decision_made_elsewhere_is_seen_through_the_feed_without_polling(tmp_path: Path) -> None:
    overrides = {"approval": {"poll_interval_s": 30.0, "fallback_poll_interval_s": 600.0}}
    async with inprocess_treasury(tmp_path, overrides) as harness:
        created = (await harness.alice.call_tool("wire_transfer", {"to": "acct-feed", "amount": 30_000})).result
        assert created["status"] == "working"
        await decide_elsewhere(harness, "acct-feed", "approve")
        # Polling alone would look again only after 30 s.
        assert_approved_executed(await settled(harness.alice, created["taskId"], timeout_s=10))
        assert [entry["to"] for entry in harness.ledger()] == ["acct-feed"]


@pytest.mark.parametrize("follow", [True, False])
async def test_a_still_pending_request_is_polled_at_the_fallback_interval_only_with_the_feed(
    tmp_path: Path, follow: bool
) -> None:
    overrides = {"approval": {"poll_interval_s": 0.2, "fallback_poll_interval_s": 900.0, "follow_changes": follow}}
    async with inprocess_treasury(tmp_path, overrides) as harness:
        created = (await harness.alice.call_tool("wire_transfer", {"to": "acct-fallback", "amount": 30_000})).result
        store = harness.deployment.approval.store

        async def next_look_after_creation_ms() -> int:
            workflow = await store.get(created["taskId"])
            assert workflow is not None
            return workflow.next_check_at - workflow.created_at

        if follow:  # the first look (0.2 s after creation) schedules the next one 900 s on
            await eventually(next_look_after_creation_ms, lambda delay: delay > 600_000)
        else:  # looked at every 0.2 s: the next look keeps moving, a few seconds on at most
            delay = await eventually(next_look_after_creation_ms, lambda delay: delay > 1_000)
            assert delay < 60_000
        assert (await harness.alice.get(created["taskId"])).result["status"] == "working"
