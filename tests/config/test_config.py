"""Deployment files: every problem names the file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_approval.config import ConfigError, load_config

MINIMAL = '[policy]\ncedar = "p.cedar"\n[tools]\nmodule = "t.py"\n'


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "deploy.toml"
    path.write_text(text)
    return path


def test_the_example_loads_and_resolves_paths_against_its_file() -> None:
    config = load_config("examples/treasury/config.toml")
    assert config.resolve(config.policy.cedar).is_file()
    assert config.store_url().startswith("sqlite:////")
    assert config.roles_of("carol") == frozenset({"approver"})
    assert config.tokens()["alice-token"] == "alice"
    assert config.templates["close_quarter"].approvals_required == 2


@pytest.mark.parametrize(
    ("text", "named"),
    [
        (MINIMAL + "[approval]\nmax_generations = 0\n", "approval.max_generations"),
        (MINIMAL + "[approval]\nsurprise = 1\n", "approval.surprise"),
        ('[tools]\nmodule = "t.py"\n', "policy"),
        (MINIMAL + '[[principals]]\ntoken = "alice-token"\nid = "alice"\n', "dev_mode"),
        (MINIMAL + '[[resolvers]]\ntemplate = "refund"\nat_most = 5\napprove_if_argument = "amount"\n', "refund"),
        (MINIMAL + '[templates.t]\n[[resolvers]]\ntemplate = "t"\nat_most = 5\n', "approve_if_argument"),
        (MINIMAL + "[approval\n", "not valid TOML"),
    ],
)
def test_invalid_files_name_file_and_field(tmp_path: Path, text: str, named: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    assert str(path) in str(raised.value)
    assert named in str(raised.value)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such configuration file"):
        load_config(tmp_path / "absent.toml")
