"""LangGraph (interrupt / Command(resume=...), SQLite checkpointer) through ``examples/agents/langgraph.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agents import contract
from tests.support.treasury import TreasuryServer

pytest.importorskip("langgraph.checkpoint.sqlite", reason="the agents extra (interop leg k runs this in its own venv)")

pytestmark = pytest.mark.slow
NAME = "langgraph"


def test_an_approval_after_the_process_was_killed_runs_the_call_once(treasury: TreasuryServer, tmp_path: Path) -> None:
    contract.approved_after_a_kill(NAME, treasury, tmp_path)


def test_a_denial_reaches_the_model_and_nothing_runs(treasury: TreasuryServer, tmp_path: Path) -> None:
    contract.denied(NAME, treasury, tmp_path)


def test_a_call_that_needs_no_approval_finishes_at_once(treasury: TreasuryServer, tmp_path: Path) -> None:
    contract.no_approval_needed(NAME, treasury, tmp_path)
