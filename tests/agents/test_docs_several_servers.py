"""docs/agents.md "Several servers", run as written: each framework's ``start`` and ``resume`` over two servers.

The snippets (the shared ``connect`` and the framework's own) are taken from the chapter and run
with the framework's test model from its example; server a allows a transfer of 5,000 that
server b gates. A resume given only a is refused with nothing sent; after b's reviewer denies,
a resume with both (new clients, as a new process would have) hands the model both outcomes.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from mcp_approval.agents import ServerNotGivenError
from tests.agents import contract
from tests.support.treasury import TreasuryServer

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

CHAPTER = Path(__file__).resolve().parents[2] / "docs" / "agents.md"
EXAMPLES = contract.EXAMPLES
#: The chapter's subsection of each framework under "Several servers".
HEADINGS = {
    "pydantic_ai": "### pydantic-ai",
    "langgraph": "### LangGraph",
    "openai_agents": "### OpenAI Agents SDK",
    "google_adk": "### Google ADK",
    "strands": "### strands",
    "llama_index": "### LlamaIndex",
}


def python_block(text: str, heading: str) -> str:
    """The first python block after ``heading`` (a line of its own)."""
    start = re.search(rf"^{re.escape(heading)}$", text, re.MULTILINE)
    assert start is not None, f"no {heading!r} in {CHAPTER.name}"
    block = re.search(r"```python\n(.*?)```", text[start.end() :], re.DOTALL)
    assert block is not None, f"no python block under {heading!r}"
    return block.group(1)


def snippets(framework: str) -> dict[str, Any]:
    """The shared ``connect`` and the framework's ``start`` and ``resume``, executed as written."""
    text = CHAPTER.read_text(encoding="utf-8")
    section = text[text.index("## Several servers") :]
    namespace: dict[str, Any] = {"__name__": f"docs_several_servers_{framework}"}
    exec(compile(python_block(section, "## Several servers"), str(CHAPTER), "exec"), namespace)
    exec(compile(python_block(section, HEADINGS[framework]), str(CHAPTER), "exec"), namespace)
    return namespace


def example(framework: str) -> ModuleType:
    """``examples/agents/<framework>.py`` as a module (its scripted models), not run."""
    spec = importlib.util.spec_from_file_location(f"example_{framework}", EXAMPLES / f"{framework}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class ScriptedChat:
    """A LangGraph chat model: ``bind_tools`` keeps nothing, ``ainvoke`` answers as the example's script does."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def bind_tools(self, tools: list[dict[str, Any]]) -> ScriptedChat:
        assert tools, "the model is given the servers' tools"
        return self

    async def ainvoke(self, messages: list[Any]) -> Any:
        return self.answer(messages)


def model_for(framework: str, prompt: str) -> Any:
    """The framework's test model, as its example makes it."""
    module = example(framework)
    if framework == "langgraph":
        return ScriptedChat(module.scripted_answer)
    if framework == "google_adk":
        return module.ScriptedModel(model="scripted")
    if framework == "strands":
        return module.ScriptedModel()
    if framework == "llama_index":
        return module.scripted_llm(prompt)
    return module.scripted_model(prompt)


async def test_each_pending_call_resumes_on_its_own_server_as_the_chapter_shows(
    framework: str, treasury: TreasuryServer, strict_treasury: TreasuryServer, tmp_path: Path
) -> None:
    docs = snippets(framework)
    connect, start, resume = docs["connect"], docs["start"], docs["resume"]
    urls = {"a": f"{treasury.base_url}/mcp", "b": f"{strict_treasury.base_url}/mcp"}
    journal, on_a, on_b = tmp_path / "calls.sqlite3", contract.new_account("doc-a"), contract.new_account("doc-b")
    prompt = f"Send 5000 to {on_a} on a and send 5000 to {on_b} on b"
    async with connect(urls, "alice-token", journal) as servers:
        pending = await start(servers, model_for(framework, prompt), prompt, tmp_path)
    assert [call.server for call in pending] == ["b"], pending
    assert (contract.transfers_to(treasury, on_a), contract.transfers_to(strict_treasury, on_b)) == (1, 0)
    async with connect({"a": urls["a"]}, "alice-token", journal) as only_a:
        with pytest.raises(ServerNotGivenError, match=f"server 'b': {pending[0].reference}"):
            await resume(only_a, model_for(framework, prompt), tmp_path)
    assert len(contract.pending_requests(strict_treasury, on_b)) == 1
    contract.decide(strict_treasury, on_b, "deny")
    async with connect(urls, "alice-token", journal) as servers:
        said = str(await resume(servers, model_for(framework, prompt), tmp_path))
    assert f"to {on_a} completed" in said, said
    assert "denied" in said, said
    assert (contract.transfers_to(treasury, on_a), contract.transfers_to(strict_treasury, on_b)) == (1, 0)
