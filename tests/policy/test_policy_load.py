"""Startup validation: every load error names the file and the line (and the policy when known)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcp_approval.policy import CedarPDP, PolicyLoadError
from mcp_approval.policy.source import parse_duration, split_statements
from tests.policy.conftest import TODO_ENTITIES, TODO_POLICY, TODO_SCHEMA


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def load_error(*args: Path | None) -> PolicyLoadError:
    with pytest.raises(PolicyLoadError) as caught:
        CedarPDP.from_files(*args)  # type: ignore[arg-type]
    return caught.value


def test_the_todo_example_loads_with_its_schema():
    pdp = CedarPDP.from_files(TODO_POLICY, TODO_ENTITIES, TODO_SCHEMA)
    assert len(pdp.policies) == 7


def test_syntax_error_names_file_line_and_policy(tmp_path: Path):
    policy = write(
        tmp_path,
        "broken.cedar",
        """// header comment; with a semicolon
permit (principal, action, resource);

@id("second")
permit (principal, action == Action::"x", resource)
when { context.count == };
""",
    )
    error = load_error(policy)
    assert (error.path, error.line, error.policy_id) == (str(policy), 6, 'policy1 (@id "second")')
    assert str(error).startswith(f'{policy}:6: policy policy1 (@id "second"): unexpected token')


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        (
            "permit (principal, action, resource) when { true }\npermit (principal, action, resource);\n",
            2,
            "unexpected token",
        ),
        ("permit (principal, action, resource);\n\npermitt (principal, action, resource);\n", 3, "permitt"),
        ('permit (principal, action, resource)\nwhen {\n  principal.roles.containz("x")\n};\n', 3, "containz"),
        (
            'permit (principal, action, resource);\npermit (principal, action, resource)\nwhen { "open\n\n};\n',
            3,
            "token",
        ),
        ('@requestable("a")\n@requestable("b")\nforbid (principal, action, resource);\n', 2, "@requestable"),
        ("permit (principal, action, resource);\npermit (principal, action, resource)\n", 3, "end of input"),
    ],
)
def test_syntax_errors_are_located(tmp_path: Path, text: str, line: int, fragment: str):
    error = load_error(write(tmp_path, "p.cedar", text))
    assert error.line == line, str(error)
    assert fragment in str(error)


def test_unknown_entity_type_against_the_schema_fails_startup(tmp_path: Path):
    schema = write(tmp_path, "todo.cedarschema", TODO_SCHEMA.read_text(encoding="utf-8"))
    policy = write(
        tmp_path,
        "todo.cedar",
        TODO_POLICY.read_text(encoding="utf-8")
        + '\n@id("typo")\npermit (\n  principal is usr,\n  action == Action::"can_read_todos",\n  resource\n);\n',
    )
    error = load_error(policy, TODO_ENTITIES, schema)
    typo_line = policy.read_text(encoding="utf-8").splitlines().index("  principal is usr,") + 1
    assert error.path == str(policy)
    assert error.line == typo_line
    assert error.policy_id is not None
    assert '@id "typo"' in error.policy_id
    assert "unrecognized entity type `usr`" in str(error)
    assert str(error).startswith(f"{policy}:{typo_line}: ")


def test_unknown_action_against_the_schema_fails_startup(tmp_path: Path):
    policy = write(tmp_path, "p.cedar", 'permit (principal, action == Action::"can_fly", resource);\n')
    error = load_error(policy, None, TODO_SCHEMA)
    assert error.line == 1
    assert "can_fly" in str(error)


def test_entity_of_an_unknown_type_fails_startup(tmp_path: Path):
    entities = json.loads(TODO_ENTITIES.read_text(encoding="utf-8"))
    entities.append({"uid": {"type": "usr", "id": "x"}, "attrs": {}, "parents": []})
    path = write(tmp_path, "entities.json", json.dumps(entities, indent=2))
    error = load_error(TODO_POLICY, path, TODO_SCHEMA)
    expected_line = path.read_text(encoding="utf-8").splitlines().index('      "type": "usr",') - 1
    assert (error.path, error.line) == (str(path), expected_line)
    assert 'usr::"x"' in str(error)


def test_entity_attribute_of_the_wrong_type_fails_startup(tmp_path: Path):
    text = '[\n  {"uid": {"type": "user", "id": "a"}, "attrs": {"roles": "admin"}, "parents": []}\n]\n'
    error = load_error(TODO_POLICY, write(tmp_path, "e.json", text), TODO_SCHEMA)
    assert error.line == 2


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ('[\n  {"uid": {"type": "user", "id": "a"},\n  "attrs": {}\n  "parents": []}\n]', 4, "invalid JSON"),
        ('{"uid": {"type": "user", "id": "a"}}', 1, "JSON list"),
        ('[\n  {"uid": "user::a", "attrs": {}, "parents": []}\n]', 2, "uid"),
        ('[\n  {"uid": {"type": "user", "id": "a"}, "attrs": {}, "parents": "no"}\n]', 2, "malformed"),
    ],
)
def test_malformed_entities_fail_startup(tmp_path: Path, text: str, line: int, fragment: str):
    path = write(tmp_path, "e.json", text)
    error = load_error(TODO_POLICY, path)
    assert (error.path, error.line) == (str(path), line)
    assert fragment in str(error)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("entity user;\n\nentity todo {\n  ownerID: Strin,\n};\n", 4),
        ("entity user;\nentity todo {{\n};\n", 2),
        ('{\n  "": {\n    "entityTypes": {},\n    "actions": {}\n  ,\n}', 6),
    ],
)
def test_broken_schema_fails_startup(tmp_path: Path, text: str, line: int):
    path = write(tmp_path, "s.cedarschema", text)
    error = load_error(TODO_POLICY, None, path)
    assert (error.path, error.line) == (str(path), line), str(error)


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        (
            'permit (principal, action, resource);\n@requestable("t")\npermit (principal, action, resource);',
            2,
            "forbid",
        ),
        ('@requestable("t")\n@deadline("P1M")\nforbid (principal, action, resource);', 2, "@deadline"),
        ('@requestable("t")\n@deadline("tomorrow")\nforbid (principal, action, resource);', 2, "@deadline"),
        ('forbid (principal, action, resource);\n@display("x")\nforbid (principal, action, resource);', 2, "@display"),
    ],
)
def test_misused_annotations_fail_startup(tmp_path: Path, text: str, line: int, fragment: str):
    error = load_error(write(tmp_path, "p.cedar", text))
    assert error.line == line
    assert fragment in str(error)


def test_every_schema_problem_is_reported(tmp_path: Path):
    policy = write(
        tmp_path,
        "p.cedar",
        "permit (principal is usr, action, resource);\npermit (principal, action, resource is tdo);\n",
    )
    error = load_error(policy, None, TODO_SCHEMA)
    lines = {issue.line for issue in error.issues}
    assert lines == {1, 2}
    assert "usr" in str(error)
    assert "tdo" in str(error)


def test_missing_file_is_named(tmp_path: Path):
    missing = tmp_path / "nope.cedar"
    error = load_error(missing)
    assert error.path == str(missing)
    assert "cannot read" in str(error)


def test_statements_follow_cedar_positional_ids():
    text = (
        'permit (principal, action, resource) when { "a;b" == "a;b" }; // c;\n'
        '\n@id("x")\nforbid (principal, action, resource);'
    )
    statements = split_statements(text)
    assert [(s.policy_id, s.first_line, s.last_line) for s in statements] == [("policy0", 1, 1), ("policy1", 3, 4)]
    assert statements[1].id_annotation == "x"


@pytest.mark.parametrize(
    ("value", "seconds"), [("PT24H", 86400), ("P1D", 86400), ("PT15M", 900), ("P1W", 604800), ("P1DT1S", 86401)]
)
def test_deadline_durations(value: str, seconds: int):
    assert parse_duration(value).total_seconds() == seconds


@pytest.mark.parametrize("value", ["P", "PT", "P1Y", "P1M", "PT0S", "1H", "PT1.5H", "P1DT"])
def test_bad_deadline_durations(value: str):
    with pytest.raises(ValueError, match="duration"):
        parse_duration(value)
