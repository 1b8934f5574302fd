"""pydantic-ai specifics: a denial reaches the model as a failed tool return (runs where pydantic-ai is installed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.agents import contract
from tests.support.treasury import TreasuryServer

pytest.importorskip("pydantic_ai", reason="the agents extra (interop leg k runs this in its own venv)")

pytestmark = pytest.mark.slow


def test_a_denial_is_a_failed_tool_return_as_pydantic_ai_marks_tool_errors(
    treasury: TreasuryServer, tmp_path: Path
) -> None:
    example, account = contract.Example("pydantic_ai", treasury, tmp_path), contract.new_account("failed")
    contract.pending_reference(example.run("start", f"Send 30000 to {account}"))
    contract.decide(treasury, account, "deny")
    example.run("resume")
    messages = json.loads((tmp_path / "finished.json").read_text())["messages"]
    returns = [part for message in messages for part in message["parts"] if part["part_kind"] == "tool-return"]
    assert [part["outcome"] for part in returns] == ["failed"], returns
    assert "did not run" in returns[0]["content"]
