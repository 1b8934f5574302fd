"""``scripts/sep_matrix.py`` and the SEP-2643 traceability yaml it reads."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "sep_matrix.py"
YAML = ROOT / "conformance" / "sep-2643.yaml"


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sep_matrix", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["sep_matrix"] = module
    spec.loader.exec_module(module)
    return module


matrix = load_script()

SMALL_YAML = """\
# comment
sep: 9999
spec_url: https://example.test/sep  # trailing comment
requirements:
  - check: sep-9999-one
    text: 'The server MUST do one thing, it''s said.'
  - check: sep-9999-two
    text: "The client SHOULD do \\"two\\"."
  - text: 'Intermediaries MUST forward.'
    excluded: 'not observable'
    issue: 'x/1'
"""


def junit(*cases: tuple[str, list[str], str]) -> str:
    body = []
    for name, checks, result in cases:
        properties = "".join(f'<property name="sep-check" value="{check}"/>' for check in checks)
        outcome = {"pass": "", "fail": '<failure message="x"/>', "error": '<error message="x"/>', "skip": "<skipped/>"}[
            result
        ]
        body.append(
            f'<testcase classname="tests.m" name="{name}"><properties>{properties}</properties>{outcome}</testcase>'
        )
    return f'<?xml version="1.0"?><testsuites><testsuite name="pytest">{"".join(body)}</testsuite></testsuites>'


def run(tmp_path: Path, yaml_text: str, report: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "sep.yaml").write_text(yaml_text)
    (tmp_path / "report.xml").write_text(report)
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "sep.yaml"), str(tmp_path / "report.xml")],
        capture_output=True,
        text=True,
        check=False,
    )


def test_parser_reads_the_subset():
    top, items = matrix.parse_yaml(SMALL_YAML)
    assert top == {"sep": "9999", "spec_url": "https://example.test/sep"}
    assert items[0] == {"check": "sep-9999-one", "text": "The server MUST do one thing, it's said."}
    assert items[1]["text"] == 'The client SHOULD do "two".'
    assert items[2] == {"text": "Intermediaries MUST forward.", "excluded": "not observable", "issue": "x/1"}


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("sep: 1\nrequirements:\n  - check: sep-1-a\n    text: 'unterminated\n", "single-quoted"),
        ("sep: 1\nrequirements:\n  - check: sep-1-a\n    text: 'a'b'\n", "single-quoted"),
        ("sep: 1\n  stray: x\n", "outside"),
        ("sep: 1\nrequirements:\n    text: x\n", "list item"),
        ("sep: 1\nrequirements:\n  - text: a\n    text: b\n", "duplicate"),
        ("sep: 1\nlist:\n", "only 'requirements'"),
    ],
)
def test_parser_rejects_what_it_does_not_understand(text, why):
    with pytest.raises(matrix.MatrixError, match=why):
        matrix.parse_yaml(text)


@pytest.mark.parametrize(
    ("rows", "why"),
    [
        ("  - text: a\n", "exactly one"),
        ("  - check: sep-1-a\n    excluded: b\n    text: c\n", "exactly one"),
        ("  - check: sep-2-a\n    text: c\n", "does not start with"),
        ("  - check: sep-1-a\n    text: c\n  - check: sep-1-a\n    text: d\n", "twice"),
        ("  - check: sep-1-a\n", "no text"),
        ("  - check: sep-1-a\n    text: c\n    colour: red\n", "unknown keys"),
    ],
)
def test_rows_are_validated(tmp_path, rows, why):
    path = tmp_path / "x.yaml"
    path.write_text(f"sep: 1\nrequirements:\n{rows}")
    with pytest.raises(matrix.MatrixError, match=why):
        matrix.load_requirements(path)


def test_all_covered_exits_zero_and_prints_each_requirement(tmp_path):
    result = run(tmp_path, SMALL_YAML, junit(("t1", ["sep-9999-one"], "pass"), ("t2[a]", ["sep-9999-two"], "pass")))
    assert result.returncode == 0, result.stdout
    assert "PASS      sep-9999-one" in result.stdout
    assert "passed: tests.m::t1" in result.stdout
    assert "EXCLUDED  -" in result.stdout
    assert "reason: not observable" in result.stdout
    assert result.stdout.strip().endswith("3 requirements: 2 pass, 0 fail, 0 untested, 1 excluded")


@pytest.mark.parametrize(
    ("cases", "status"),
    [
        pytest.param([("t1", ["sep-9999-one"], "pass")], "UNTESTED  sep-9999-two", id="untested"),
        pytest.param(
            [("t1", ["sep-9999-one"], "pass"), ("t2", ["sep-9999-two"], "fail"), ("t3", ["sep-9999-two"], "pass")],
            "FAIL      sep-9999-two",
            id="one-failing-test-fails-the-row",
        ),
        pytest.param(
            [("t1", ["sep-9999-one"], "pass"), ("t2", ["sep-9999-two"], "error")], "FAIL      sep-9999-two", id="error"
        ),
        pytest.param(
            [("t1", ["sep-9999-one"], "pass"), ("t2", ["sep-9999-two"], "skip")],
            "UNTESTED  sep-9999-two",
            id="skipped-only",
        ),
        pytest.param(
            [("t1", ["sep-9999-one", "sep-9999-two", "sep-9999-typo"], "pass")],
            "UNLISTED  sep-9999-typo",
            id="unlisted-id",
        ),
    ],
)
def test_gaps_exit_non_zero(tmp_path, cases, status):
    result = run(tmp_path, SMALL_YAML, junit(*cases))
    assert result.returncode == 1
    assert status in result.stdout


def test_other_seps_ids_are_not_this_yamls_business(tmp_path):
    cases = [("t1", ["sep-9999-one", "sep-2663-x"], "pass"), ("t2", ["sep-9999-two"], "pass")]
    assert run(tmp_path, SMALL_YAML, junit(*cases)).returncode == 0


def test_unreadable_inputs_exit_two(tmp_path):
    assert run(tmp_path, SMALL_YAML, "<not xml").returncode == 2
    assert run(tmp_path, "sep: x\nrequirements:\n  - text: a\n    excluded: b\n", junit()).returncode == 2


@pytest.mark.parametrize(("sep", "minimum_rows"), [(2643, 35), (2848, 60), (2663, 44)])
def test_each_sep_yaml_lists_exactly_the_checks_tests_emit(sep: int, minimum_rows: int) -> None:
    prefix, rows = matrix.load_requirements(YAML.with_name(f"sep-{sep}.yaml"))
    assert prefix == f"sep-{sep}-"
    listed = {row.check for row in rows if row.check}
    marked: set[str] = set()
    for source in Path(__file__).parents[1].rglob("test_*.py"):
        for call in re.findall(r"sep_check\(([^)]*)\)", source.read_text()):
            marked.update(re.findall(rf'"({prefix}[a-z0-9-]+)"', call))
    assert listed == marked
    assert all(row.excluded for row in rows if not row.check)
    assert len(rows) >= minimum_rows
