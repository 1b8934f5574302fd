#!/usr/bin/env python3
"""Print a SEP's requirement → test → result matrix from its traceability yaml and a JUnit XML report.

    .venv/bin/python -m pytest tests/denials --junitxml=build/denials.xml
    .venv/bin/python scripts/sep_matrix.py conformance/sep-2643.yaml build/denials.xml

Tests name the checks they cover with ``@pytest.mark.sep_check("<id>", ...)``, which becomes a
``<property name="sep-check" value="<id>"/>`` of the test case in the report.

Exit status: 0 when every non-excluded row has at least one test and all of them passed; 1 when
a row is untested, skipped only, or failing, or when a test names a check id of this SEP that
the yaml does not list; 2 when an input cannot be read.

The yaml is read by a small parser for the subset these files use (no YAML library needed):
comments, ``key: value`` at the top level, and a ``requirements:`` list whose items are
``- key: value`` followed by indented ``key: value`` lines; values are plain, single-quoted
(``''`` for a quote) or double-quoted (JSON escapes).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

CHECK_PROPERTY = "sep-check"
_KEY_VALUE = re.compile(r"(?P<key>[A-Za-z_][A-Za-z0-9_-]*):(?:\s+(?P<value>.*?))?\s*$")


class MatrixError(Exception):
    """An input the matrix cannot be built from."""


@dataclass
class Requirement:
    """One row of the yaml."""

    text: str
    check: str | None = None
    excluded: str | None = None
    issue: str | None = None


@dataclass
class Outcome:
    """The tests that emitted one check id, by result."""

    passed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def parse_scalar(raw: str, line_number: int) -> str:
    """A plain, single-quoted or double-quoted scalar."""
    if raw.startswith("'"):
        if len(raw) < 2 or not raw.endswith("'") or "'" in raw[1:-1].replace("''", ""):
            raise MatrixError(f"line {line_number}: unterminated or malformed single-quoted value")
        return raw[1:-1].replace("''", "'")
    if raw.startswith('"'):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise MatrixError(f"line {line_number}: malformed double-quoted value ({exc.msg})") from exc
        if not isinstance(value, str):
            raise MatrixError(f"line {line_number}: not a string")
        return value
    if " #" in raw:
        raw = raw.split(" #", 1)[0].rstrip()
    return raw


def parse_yaml(text: str) -> tuple[dict[str, str], list[dict[str, str]]]:
    """The top-level scalars and the ``requirements`` items of a traceability yaml."""
    top: dict[str, str] = {}
    items: list[dict[str, str]] = []
    in_requirements = False
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(line) - len(line.lstrip(" "))
        if "\t" in line[: indent + 1]:
            raise MatrixError(f"line {number}: tabs are not allowed for indentation")
        if indent == 0:
            match = _KEY_VALUE.fullmatch(stripped)
            if match is None:
                raise MatrixError(f"line {number}: expected 'key: value'")
            if match["value"] is None:
                if match["key"] != "requirements":
                    raise MatrixError(f"line {number}: only 'requirements' may hold a list")
                in_requirements = True
                continue
            in_requirements = False
            top[match["key"]] = parse_scalar(match["value"], number)
            continue
        if not in_requirements:
            raise MatrixError(f"line {number}: indented line outside 'requirements'")
        if stripped.startswith("- "):
            items.append({})
            stripped = stripped[2:].strip()
        elif not items:
            raise MatrixError(f"line {number}: expected a '- ' list item")
        match = _KEY_VALUE.fullmatch(stripped)
        if match is None or match["value"] is None:
            raise MatrixError(f"line {number}: expected 'key: value' inside a requirement")
        if match["key"] in items[-1]:
            raise MatrixError(f"line {number}: duplicate key {match['key']!r}")
        items[-1][match["key"]] = parse_scalar(match["value"], number)
    return top, items


def load_requirements(path: Path) -> tuple[str, list[Requirement]]:
    """The check-id prefix (``sep-NNNN-``) and the validated rows of a traceability yaml."""
    top, items = parse_yaml(path.read_text(encoding="utf-8"))
    if not top.get("sep", "").isdigit():
        raise MatrixError(f"{path}: 'sep' must be the SEP number")
    prefix = f"sep-{top['sep']}-"
    rows: list[Requirement] = []
    seen: set[str] = set()
    for index, item in enumerate(items, start=1):
        unknown = set(item) - {"text", "check", "excluded", "issue", "url"}
        if unknown:
            raise MatrixError(f"requirement {index}: unknown keys {sorted(unknown)}")
        if not item.get("text"):
            raise MatrixError(f"requirement {index}: no text")
        if ("check" in item) == ("excluded" in item):
            raise MatrixError(f"requirement {index}: needs exactly one of 'check' and 'excluded'")
        check = item.get("check")
        if check is not None:
            if not check.startswith(prefix):
                raise MatrixError(f"requirement {index}: check {check!r} does not start with {prefix!r}")
            if check in seen:
                raise MatrixError(f"requirement {index}: check {check!r} is listed twice")
            seen.add(check)
        rows.append(Requirement(text=item["text"], check=check, excluded=item.get("excluded"), issue=item.get("issue")))
    if not rows:
        raise MatrixError(f"{path}: no requirements")
    return prefix, rows


def load_outcomes(path: Path) -> dict[str, Outcome]:
    """Check id → the tests of the JUnit XML report that emitted it, by result."""
    try:
        root = ET.parse(path).getroot()  # noqa: S314 (a local report, not untrusted input)
    except ET.ParseError as exc:
        raise MatrixError(f"{path}: not XML ({exc})") from exc
    outcomes: dict[str, Outcome] = {}
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        checks = {prop.get("value", "") for prop in case.iter("property") if prop.get("name") == CHECK_PROPERTY}
        result = _result_of(case)
        for check in checks:
            getattr(outcomes.setdefault(check, Outcome()), result).append(name)
    return outcomes


def _result_of(case: ET.Element) -> str:
    if case.find("failure") is not None or case.find("error") is not None:
        return "failed"
    if case.find("skipped") is not None:
        return "skipped"
    return "passed"


@dataclass
class RowResult:
    """One requirement evaluated against a report.

    ``status`` is ``PASS`` (every test that emitted the check passed, and at least one did),
    ``FAIL`` (one of them failed or errored), ``UNTESTED`` (none ran, or all were skipped) or
    ``EXCLUDED`` (the row has no check, only a reason).
    """

    requirement: Requirement
    status: str
    outcome: Outcome


def evaluate(prefix: str, rows: list[Requirement], outcomes: dict[str, Outcome]) -> tuple[list[RowResult], list[str]]:
    """Each row's status, and the check ids of this SEP that tests emit but the yaml does not list."""
    results: list[RowResult] = []
    for row in rows:
        if row.check is None:
            results.append(RowResult(row, "EXCLUDED", Outcome()))
            continue
        outcome = outcomes.get(row.check, Outcome())
        status = "FAIL" if outcome.failed else "PASS" if outcome.passed else "UNTESTED"
        results.append(RowResult(row, status, outcome))
    unlisted = sorted(check for check in outcomes if check.startswith(prefix) and check not in _checks(rows))
    return results, unlisted


def build_matrix(prefix: str, rows: list[Requirement], outcomes: dict[str, Outcome]) -> tuple[list[str], bool]:
    """The report's lines, and whether every requirement is satisfied."""
    results, unlisted = evaluate(prefix, rows, outcomes)
    lines: list[str] = []
    counts = {"PASS": 0, "FAIL": 0, "UNTESTED": 0, "EXCLUDED": 0}
    for result in results:
        row, outcome = result.requirement, result.outcome
        if result.status == "EXCLUDED":
            detail = [f"    reason: {row.excluded}"] + ([f"    issue: {row.issue}"] if row.issue else [])
        else:
            detail = [f"    {kind}: {test}" for kind, tests in _listing(outcome) for test in group_tests(tests)]
            if outcome.skipped and not outcome.passed:
                detail.append("    (skipped tests do not count)")
        counts[result.status] += 1
        lines.append(f"{result.status:<9} {row.check or '-'}")
        lines.append(f"    {_shorten(row.text)}")
        lines.extend(detail)
    for check in unlisted:
        lines.append(f"UNLISTED  {check}: emitted by tests but not in the yaml")
    summary = ", ".join(f"{count} {name.lower()}" for name, count in counts.items())
    lines.append(f"{len(rows)} requirements: {summary}" + (f", {len(unlisted)} unlisted ids" if unlisted else ""))
    ok = not unlisted and all(result.status in ("PASS", "EXCLUDED") for result in results)
    return lines, ok


def _listing(outcome: Outcome) -> list[tuple[str, list[str]]]:
    return [("failed", outcome.failed), ("passed", outcome.passed), ("skipped", outcome.skipped)]


def group_tests(tests: list[str]) -> list[str]:
    """Test names with parametrized cases folded: ``module::test (3 cases)``."""
    cases: dict[str, int] = {}
    for test in tests:
        base = test.split("[", 1)[0]
        cases[base] = cases.get(base, 0) + 1
    return [base if count == 1 else f"{base} ({count} cases)" for base, count in cases.items()]


def _checks(rows: list[Requirement]) -> set[str]:
    return {row.check for row in rows if row.check is not None}


def _shorten(text: str, width: int = 110) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def main(argv: list[str] | None = None) -> int:
    """Print the matrix; see the module docstring for the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("yaml", type=Path, help="the SEP traceability yaml, e.g. conformance/sep-2643.yaml")
    parser.add_argument("junit", type=Path, help="a pytest --junitxml report")
    args = parser.parse_args(argv)
    try:
        prefix, rows = load_requirements(args.yaml)
        outcomes = load_outcomes(args.junit)
    except (OSError, MatrixError) as exc:
        print(f"sep_matrix: {exc}", file=sys.stderr)
        return 2
    lines, ok = build_matrix(prefix, rows, outcomes)
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
