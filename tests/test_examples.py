"""The examples are plain files: a copy of an example folder (``cp -r``) is a complete deployment."""

from __future__ import annotations

import shutil
from pathlib import Path

from mcp_approval.config import load_config
from mcp_approval.reference.config import load_arap_config
from mcp_approval.server.deployment import build_deployment
from mcp_approval.server.validation import registered_tools

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_no_file_under_examples_is_a_symbolic_link() -> None:
    links = [str(path.relative_to(EXAMPLES)) for path in EXAMPLES.rglob("*") if path.is_symlink()]
    assert links == [], "a copied example would lose these files; make them plain files"


def test_a_copy_of_the_treasury_example_loads_and_validates(tmp_path: Path) -> None:
    # symlinks=True copies a link as a link, as `cp -r` does: a relative link would dangle here.
    copy = shutil.copytree(EXAMPLES / "treasury", tmp_path / "treasury", symlinks=True)
    for name in ("config.toml", "config-arap.toml"):
        config = load_config(copy / name)
        deployment = build_deployment(config, store_url=f"sqlite:///{tmp_path / 'check.db'}", base_url="http://x")
        tools = registered_tools(deployment.server)
        assert {"wire_transfer", "refund", "close_quarter"} <= tools, name
    arap = load_arap_config(copy / "arap-server.toml")
    assert arap.resolve(arap.policy.cedar).is_file()
