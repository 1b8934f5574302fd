"""Served treasury examples shared by a module's adapter tests: one as the example ships, one stricter."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest

from tests.support.treasury import TreasuryServer, deployment_dir

#: The example's threshold for a transfer that needs approval, and the stricter copy's.
THRESHOLD = 'decimal("25000.0")'
STRICT_THRESHOLD = 'decimal("1000.0")'


@pytest.fixture(scope="module")
def treasury(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TreasuryServer]:
    """One treasury server per module (each test uses its own accounts)."""
    server = TreasuryServer(deployment_dir(tmp_path_factory.mktemp("treasury"))).start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture(scope="module")
def strict_treasury(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TreasuryServer]:
    """A second treasury whose policy gates transfers over 1,000 (the example's gates those over 25,000)."""
    directory = deployment_dir(tmp_path_factory.mktemp("strict-treasury"))
    policy = directory / "policy.cedar"
    text = policy.read_text()
    assert THRESHOLD in text, "the treasury policy's threshold moved: update this fixture"
    policy.write_text(text.replace(THRESHOLD, STRICT_THRESHOLD))
    server = TreasuryServer(directory).start()
    try:
        yield server
    finally:
        server.kill()


#: Each framework's example (examples/agents/NAME.py), and the module the framework is imported as.
FRAMEWORKS = {
    "pydantic_ai": "pydantic_ai",
    "langgraph": "langgraph",
    "openai_agents": "agents",
    "google_adk": "google.adk",
    "strands": "strands",
    "llama_index": "llama_index.core",
}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


@pytest.fixture(params=list(FRAMEWORKS))
def framework(request: pytest.FixtureRequest) -> str:
    """A framework's name; skipped where it is not installed (the development venv: leg k runs each in its own)."""
    name: str = request.param
    if not _installed(FRAMEWORKS[name]):
        pytest.skip(f"{FRAMEWORKS[name]} is not installed (interop leg k runs this in its own venv)")
    return name
