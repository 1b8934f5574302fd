"""Each framework's example (``examples/agents/NAME.py``) as real processes against served treasury examples.

One parameter per framework (the ``framework`` fixture); a parameter runs only where its framework is
installed (interop leg k runs each framework's in a venv of its own: ``pytest -k NAME``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agents import contract
from tests.support.treasury import TreasuryServer

pytestmark = pytest.mark.slow


def test_an_approval_after_the_process_was_killed_runs_the_call_once(
    framework: str, treasury: TreasuryServer, tmp_path: Path
) -> None:
    contract.approved_after_a_kill(framework, treasury, tmp_path)


def test_a_denial_reaches_the_model_and_nothing_runs(framework: str, treasury: TreasuryServer, tmp_path: Path) -> None:
    contract.denied(framework, treasury, tmp_path)


def test_a_call_that_needs_no_approval_finishes_at_once(
    framework: str, treasury: TreasuryServer, tmp_path: Path
) -> None:
    contract.no_approval_needed(framework, treasury, tmp_path)


@pytest.mark.parametrize("decision", ["deny", "approve"])
def test_two_servers_each_call_resumes_on_its_own_server(
    framework: str, decision: str, treasury: TreasuryServer, strict_treasury: TreasuryServer, tmp_path: Path
) -> None:
    contract.two_servers(framework, treasury, strict_treasury, tmp_path, decision)
