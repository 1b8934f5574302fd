"""Google ADK specifics (run where ADK is installed)."""

from __future__ import annotations

import pytest

pytest.importorskip("google.adk", reason="the agents extra (interop leg k runs this in its own venv)")

from google.adk.sessions import InMemorySessionService

from mcp_approval.agents.google_adk import resume_message

pytestmark = pytest.mark.anyio


async def test_resuming_a_session_with_nothing_pending_resumes_nothing() -> None:
    # Resuming anyway started a new invocation with an empty user turn: the model was called again.
    session = await InMemorySessionService().create_session(app_name="treasury_agent", user_id="alice")
    assert await resume_message([], session) is None
