"""After the decision: the reviewer API says whether each request's call ran, and a denial's
comment reaches the requester when the template shares it (never the reviewer's name)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.outcomes import DENY_COMMENT, three_outcomes
from tests.support.timing import scaled
from tests.support.treasury import Reviewer
from tests.treasury.helpers import DISPOSITION, text_of

pytestmark = pytest.mark.anyio


async def test_the_reviewer_api_shows_what_happened_to_each_call(tmp_path: Path) -> None:
    found = await three_outcomes(tmp_path)
    try:
        async with httpx.AsyncClient(base_url=found.server.base_url, timeout=scaled(20)) as http:
            carol = Reviewer(http, "carol-token")

            async def outcome(key: str) -> dict[str, Any]:
                response = await http.get(f"/approvals/{found.requests[key]}", headers=carol.headers)
                assert response.status_code == 200, response.text
                body: dict[str, Any] = response.json()["outcome"]
                return body

            executed, denied, unknown = await outcome("approve"), await outcome("deny"), await outcome("unknown")
    finally:
        found.server.kill()

    assert [found.tasks[key]["result"]["_meta"][DISPOSITION] for key in ("approve", "deny", "unknown")] == [  # type: ignore[index]
        "approved-executed",
        "denied-not-executed",
        "outcome-unknown",
    ]
    assert executed["state"] == "approved-executed"
    assert executed["task_id"] == found.tasks["approve"]["taskId"]
    assert executed["text"].startswith("Executed: the call ran once")
    assert executed["reason"] is None
    assert datetime.fromisoformat(executed["at"]).year >= 2026

    assert denied["state"] == "denied-not-executed"
    assert denied["reason"] == f"The approval request was denied. Comment: {DENY_COMMENT}"
    assert unknown["state"] == "outcome-unknown"
    assert unknown["text"].startswith("Outcome unknown")

    # The requester reads the comment in the denial, and never who wrote it.
    denial = text_of(found.tasks["deny"]["result"])  # type: ignore[arg-type]
    assert DENY_COMMENT in denial
    assert "carol" not in denial
