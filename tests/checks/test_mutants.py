"""The kit kills every mutant of the SEP server and passes every faithful variant.

Each mutant breaks one statement of SEP-2848, SEP-2643 or SEP-2663 (``tests/checks/mutants.py``);
the kit runs every scenario against it and must fail exactly the scenarios the table names. Each
faithful variant differs where the SEPs allow; the kit must fail none. ``docs/conformance.md``
carries the same table (``test_the_mutant_table_in_the_docs_is_the_one_the_tests_run``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from mcp_approval.checks import SCENARIOS, run_checks
from tests.checks.mutants import MUTANTS, VARIANTS, Mutant, Variant, table
from tests.checks.sep_rig import SepServer, kit_options

DOC = Path(__file__).resolve().parents[2] / "docs" / "conformance.md"


def outcomes(server: SepServer, settings: dict[str, object]) -> tuple[dict[str, str], str]:
    """Every scenario's outcome on a fresh instance with ``settings``, and the run shown as text."""
    base = server.instance(**settings)
    results, summary = asyncio.run(run_checks(kit_options(base, settings)))
    shown = "\n".join(f"{r.outcome} {r.scenario}: {r.detail}" for r in results)
    if summary.verdict:
        shown += f"\nverdict: {summary.verdict}; not run: {summary.not_run}"
    return {r.scenario: r.outcome for r in results}, shown


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_the_kit_kills_the_mutant(sep_server: SepServer, mutant: Mutant) -> None:
    found, shown = outcomes(sep_server, {**mutant.settings, "mutant": mutant.name})
    failed = {scenario for scenario, outcome in found.items() if outcome == "FAIL"}
    assert failed == set(mutant.kills), shown


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.name for v in VARIANTS])
def test_the_kit_passes_the_faithful_variant(sep_server: SepServer, variant: Variant) -> None:
    found, shown = outcomes(sep_server, variant.settings)
    assert "FAIL" not in found.values(), shown
    assert list(found) == [scenario.id for scenario in SCENARIOS], shown


def test_every_mutant_is_named_once_and_killed_by_scenarios_that_exist() -> None:
    names = [mutant.name for mutant in MUTANTS]
    assert len(names) == len(set(names)) >= 40
    assert len(VARIANTS) >= 6
    known = {scenario.id: scenario for scenario in SCENARIOS}
    for mutant in MUTANTS:
        assert set(mutant.kills) <= set(known), mutant.name
        assert mutant.statement in {check for kill in mutant.kills for check in known[kill].checks}, mutant.name
    seps = {mutant.statement.split("-")[1] for mutant in MUTANTS}
    assert seps == {"2848", "2643", "2663"}


def test_the_mutant_table_in_the_docs_is_the_one_the_tests_run() -> None:
    text = DOC.read_text(encoding="utf-8")
    start, end = "<!-- mutants: python -m tests.checks.mutants -->\n", "<!-- end of mutants -->"
    assert start in text, "docs/conformance.md lacks the mutant table's opening marker"
    assert end in text, "docs/conformance.md lacks the mutant table's closing marker"
    assert text[text.index(start) + len(start) : text.index(end)] == table()
