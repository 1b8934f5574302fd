"""A paused call's saved state, edited between the pause and the resume, redirects nothing.

The saved pending call is plain JSON an application keeps beside its run (``examples/agents/*.py
--state DIR``): anyone who can write that directory can edit it. A resume only ever collects the
task the call journal recorded for the call's key; a saved call whose tool, arguments, server, key
or reference differ from the journal's record is refused with one error naming what differs, and
nothing is sent to any server. Each test runs against a served treasury example on SQLite and on
PostgreSQL; the ledger and the reviewer API show what reached the server.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_approval.agents import ApprovalTools, PendingCall, call_key_for, result_text
from mcp_approval.client import (
    CallJournalIntegrityError,
    CallTarget,
    ClientUsageError,
    SQLiteCallJournal,
    mcp_client,
)
from tests.agents.contract import (
    RUN_TIMEOUT_S,
    Example,
    _environment,
    decide,
    new_account,
    pending_requests,
    transfers_to,
)
from tests.support.timing import scaled
from tests.support.treasury import TreasuryServer, deployment_dir

pytestmark = pytest.mark.anyio


@pytest.fixture
def served(db_url: str, tmp_path: Path) -> Iterator[TreasuryServer]:
    """A treasury server on the parametrized store (SQLite, PostgreSQL)."""
    server = TreasuryServer(deployment_dir(tmp_path), db_url=db_url).start()
    try:
        yield server
    finally:
        server.kill()


def _with(**changes: Any) -> Callable[[dict[str, Any], str], dict[str, Any]]:
    def edit(saved: dict[str, Any], mallory: str) -> dict[str, Any]:
        edited = {name: value(saved, mallory) if callable(value) else value for name, value in changes.items()}
        return {**saved, **edited}

    return edit


#: Each way of editing the saved call (its JSON, as the application stores it), and what the refusal names.
EDITS: dict[str, tuple[Callable[[dict[str, Any], str], dict[str, Any]], str]] = {
    "arguments": (_with(arguments=lambda saved, mallory: {"to": mallory, "amount": 900}), "other arguments"),
    "tool": (_with(tool="approval_status", arguments=lambda saved, mallory: {"reference": mallory}), "tool"),
    "server": (_with(server="another-server"), "another-server"),
    "new-key": (
        _with(
            call_key=lambda saved, mallory: call_key_for("test", "run-edited", "call-1"),
            arguments=lambda saved, mallory: {"to": mallory, "amount": 900},
        ),
        "not in the call journal",
    ),
    "reference": (_with(reference="an-earlier-task-of-this-agent"), "an-earlier-task-of-this-agent"),
}


@pytest.mark.parametrize("edit", list(EDITS))
async def test_an_edited_saved_call_is_refused_and_nothing_is_sent(
    edit: str, served: TreasuryServer, tmp_path: Path
) -> None:
    account, mallory, journal = new_account("saved"), new_account("mallory"), tmp_path / "calls.sqlite3"
    url = f"{served.base_url}/mcp"
    async with mcp_client(url, tasks=True, auth="alice-token", call_journal=journal) as client:
        pending = await ApprovalTools(client, name="treasury", pending_wait_s=0.2).call(
            "wire_transfer", {"to": account, "amount": 30_000}, call_key=call_key_for("test", "run-1", "call-1")
        )
    assert isinstance(pending, PendingCall)
    saved = tmp_path / "pending.json"
    saved.write_text(json.dumps(pending.as_dict()))
    change, named = EDITS[edit]
    saved.write_text(json.dumps(change(json.loads(saved.read_text()), mallory)))  # between the pause and the resume
    decide(served, account, "approve")

    async with mcp_client(url, tasks=True, auth="alice-token", call_journal=journal) as client:
        gate = ApprovalTools(client, name="treasury")
        edited = PendingCall.from_dict(json.loads(saved.read_text()))
        with pytest.raises(ClientUsageError) as refused:
            await gate.verify(edited)
        with pytest.raises(ClientUsageError) as refused_again:
            await gate.wait_for_decision(edited, timeout_s=scaled(30))
        for error in (refused.value, refused_again.value):
            assert named in str(error), error
            assert "nothing was sent" in str(error), error
        assert transfers_to(served, mallory) == 0
        assert not pending_requests(served, mallory)
        # The call as the journal recorded it still resumes: the approved transfer, once.
        result = await gate.wait_for_decision(pending, timeout_s=scaled(30))
    assert f"to {account} completed" in result_text(result)
    assert transfers_to(served, account) == 1
    assert transfers_to(served, mallory) == 0


# -- a framework's saved run: the OpenAI Agents SDK's RunState, as examples/agents/openai_agents.py keeps it --


def _redirected(state: dict[str, Any], account: str, mallory: str) -> dict[str, Any]:
    """``state`` with the paused call's run id and arguments changed, the SDK's own fingerprints made to match."""
    from agents._tool_invocation import tool_invocation_identity_and_scope  # the SDK's unkeyed SHA-256

    original = json.dumps({"to": account, "amount": 30000.0}, separators=(",", ":"))
    changed = json.dumps({"to": mallory, "amount": 900.0}, separators=(",", ":"))
    text = json.dumps(state).replace(json.dumps(original)[1:-1], json.dumps(changed)[1:-1])
    edited: dict[str, Any] = json.loads(text)
    context = edited["context"]
    context["context"]["mcp_approval"]["run_id"] = "e" * 32  # a new run id: a new call key for the same call id
    for call_id, record in context.get("tool_invocations", {}).items():
        raw = {"type": "function_call", "call_id": call_id, "name": "wire_transfer", "arguments": changed}
        identity = tool_invocation_identity_and_scope(raw)
        assert identity is not None
        record["fingerprint"] = identity[3]
    assert account not in json.dumps(edited["generated_items"]), "the edit missed a copy of the arguments"
    return edited


@pytest.mark.slow
def test_an_openai_agents_run_edited_while_paused_sends_no_new_call(served: TreasuryServer, tmp_path: Path) -> None:
    pytest.importorskip("agents", reason="the agents extra (interop leg k runs this in its own venv)")
    example = Example("openai_agents", served, tmp_path / "state")
    account, mallory = new_account("oa"), new_account("m")
    started = example.run("start", f"Send 30000 to {account}")
    assert "pending" in started, started
    state_file = tmp_path / "state" / "state.json"
    saved = json.loads(state_file.read_text())
    saved["state"] = json.dumps(_redirected(json.loads(saved["state"]), account, mallory))
    state_file.write_text(json.dumps(saved))
    decide(served, account, "approve")
    refused = example.run("resume", exit_code=2)
    for said in ("refused:", "nothing was sent", "call key", "edited after the pause"):
        assert said in refused, refused
    assert transfers_to(served, mallory) == 0  # on the code before this check: a $900 transfer to mallory ran
    assert not pending_requests(served, mallory)
    assert not (tmp_path / "state" / "finished.json").exists()  # the model was handed nothing
    assert transfers_to(served, account) == 1  # the approved call ran once, on the server's decision


# -- the journal in the same directory, edited too: a journal sealed with a key the application holds --


def _journal_rows(journal: Path, statement: str, parameters: tuple[Any, ...]) -> None:
    with sqlite3.connect(journal) as db:
        assert db.execute(statement, parameters).rowcount == 1


@pytest.mark.parametrize("forgery", ["row-edited", "row-planted"])
async def test_editing_the_sealed_journal_with_the_saved_call_is_refused(
    forgery: str, served: TreasuryServer, tmp_path: Path
) -> None:
    account, mallory, journal = new_account("sealed"), new_account("mallory"), tmp_path / "calls.sqlite3"
    key = secrets.token_bytes(32)  # the application's, kept outside the state directory
    url = f"{served.base_url}/mcp"
    original = call_key_for("test", "run-1", "call-1")
    async with mcp_client(url, tasks=True, auth="alice-token", call_journal=SQLiteCallJournal(journal, key=key)) as c:
        pending = await ApprovalTools(c, name="treasury", pending_wait_s=0.2).call(
            "wire_transfer", {"to": account, "amount": 30_000}, call_key=original
        )
    assert isinstance(pending, PendingCall)
    # The saved call names other arguments (and, planted, another key); the journal is made to agree with it.
    redirected = {"to": mallory, "amount": 900}
    digest = CallTarget.of(url, "wire_transfer", redirected).arguments_digest
    edited = PendingCall.from_dict({**pending.as_dict(), "arguments": redirected})
    if forgery == "row-edited":
        _journal_rows(journal, "UPDATE calls SET arguments_digest = ? WHERE call_key = ?", (digest, original))
    else:
        edited = PendingCall.from_dict({**edited.as_dict(), "call_key": call_key_for("test", "run-2", "call-1")})
        _journal_rows(
            journal,
            "INSERT INTO calls (call_key, tool_name, task_id, started_at, server, arguments_digest)"
            " VALUES (?, 'wire_transfer', ?, 0, ?, ?)",
            (edited.call_key, pending.reference, url, digest),
        )
    decide(served, account, "approve")
    async with mcp_client(url, tasks=True, auth="alice-token", call_journal=SQLiteCallJournal(journal, key=key)) as c:
        gate = ApprovalTools(c, name="treasury")
        with pytest.raises(CallJournalIntegrityError) as refused:
            await gate.wait_for_decision(edited, timeout_s=scaled(30))
        if forgery == "row-planted":  # the paused call's own row is intact: it resumes, and its sealed outcome replays
            result = await gate.wait_for_decision(pending, timeout_s=scaled(30))
            assert await gate.wait_for_decision(pending, timeout_s=scaled(30)) == result
            assert f"to {account} completed" in result_text(result)
    assert edited.call_key in str(refused.value)
    assert "nothing was sent" in str(refused.value)
    assert transfers_to(served, mallory) == 0
    assert not pending_requests(served, mallory)
    assert transfers_to(served, account) == 1  # the approved call ran once, on the server's decision


def test_a_journal_key_shorter_than_32_bytes_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least 32 bytes, not 16"):
        SQLiteCallJournal(tmp_path / "calls.sqlite3", key=secrets.token_bytes(16))


@pytest.mark.slow
def test_a_pydantic_ai_run_whose_deferred_call_was_edited_is_refused(served: TreasuryServer, tmp_path: Path) -> None:
    pytest.importorskip("pydantic_ai", reason="the agents extra (interop leg k runs this in its own venv)")
    example = Example("pydantic_ai", served, tmp_path / "state")
    account, mallory = new_account("pa"), new_account("m")
    assert "pending" in example.run("start", f"Send 30000 to {account}")
    run_file = tmp_path / "state" / "run.json"
    run = json.loads(run_file.read_text())
    metadata = run["requests"].pop("metadata")  # the pending call as the adapter saved it stays as it was
    run = json.loads(json.dumps(run).replace(account, mallory))  # the model's call and the deferred call
    run["requests"]["metadata"] = metadata
    run_file.write_text(json.dumps(run))
    decide(served, account, "approve")
    refused = example.run("resume", exit_code=2)
    for said in ("refused:", "other arguments than the pending call's", "nothing was sent"):
        assert said in refused, refused
    # On the code before this check the model read the approved transfer's result as the edited call's.
    assert not (tmp_path / "state" / "finished.json").exists()
    assert transfers_to(served, mallory) == 0
    assert not pending_requests(served, mallory)
    assert transfers_to(served, account) == 1


def _run_keyed(example: Example, key_file: Path, *command: str, exit_code: int = 0) -> str:
    """Run the example with ``--state-key`` (before the command), to the end; stdout, or stderr on ``exit_code``."""
    argv = example.argv(*command)
    argv[-len(command) : -len(command)] = ["--state-key", str(key_file)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=_environment())
    assert done.returncode == exit_code, f"{command[0]} exited {done.returncode}, not {exit_code}:\n{done.stderr}"
    return done.stdout if exit_code == 0 else done.stderr


@pytest.mark.slow
def test_a_pydantic_ai_example_with_a_state_key_resumes_and_refuses_its_journal_edited(
    served: TreasuryServer, tmp_path: Path
) -> None:
    pytest.importorskip("pydantic_ai", reason="the agents extra (interop leg k runs this in its own venv)")
    key_file = tmp_path / "state.key"  # outside the state directory
    key_file.write_bytes(secrets.token_bytes(32))
    edited, intact = (Example("pydantic_ai", served, tmp_path / name) for name in ("edited", "intact"))
    accounts = {example.state.name: new_account(example.state.name) for example in (edited, intact)}
    for example in (edited, intact):
        assert "pending" in _run_keyed(example, key_file, "start", f"Send 30000 to {accounts[example.state.name]}")
        decide(served, accounts[example.state.name], "approve")
    _journal_rows(edited.state / "calls.sqlite3", "UPDATE calls SET started_at = started_at - 1", ())
    refused = _run_keyed(edited, key_file, "resume", exit_code=2)
    for said in ("refused:", "does not match its seal", "nothing was sent"):
        assert said in refused, refused
    assert f"to {accounts['intact']} completed" in _run_keyed(intact, key_file, "resume")


# -- frameworks that run the saved tool call again on resume: its id (so its call key) and arguments edited --


def _checkpoint_redirected(state: Path, account: str, mallory: str) -> None:
    """The paused thread's last checkpoint with the model's tool call given a new id and mallory's arguments."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    thread = (state / "thread").read_text()
    with SqliteSaver.from_conn_string(str(state / "checkpoints.sqlite3")) as saver:
        saved = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
        assert saved is not None
        assert saved.parent_config is not None
        message = saved.checkpoint["channel_values"]["messages"][-1]
        (call,) = message.tool_calls
        assert call["args"] == {"to": account, "amount": 30000}, call
        message.tool_calls = [{**call, "id": "call_edited", "args": {"to": mallory, "amount": 900}}]
        saver.put(saved.parent_config, saved.checkpoint, saved.metadata, {})  # the same checkpoint, rewritten
        again = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
    assert again is not None
    assert again.checkpoint["id"] == saved.checkpoint["id"]
    assert again.checkpoint["channel_values"]["messages"][-1].tool_calls[0]["args"]["to"] == mallory
    assert again.pending_writes, "the interrupt (the pending call as saved) is kept"


@pytest.mark.slow
def test_a_langgraph_checkpoint_edited_while_paused_sends_no_new_call(served: TreasuryServer, tmp_path: Path) -> None:
    pytest.importorskip("langgraph.checkpoint.sqlite", reason="the agents extra (interop leg k: its own venv)")
    example = Example("langgraph", served, tmp_path / "state")
    account, mallory = new_account("lg"), new_account("m")
    assert "pending" in example.run("start", f"Send 30000 to {account}")
    _checkpoint_redirected(tmp_path / "state", account, mallory)
    decide(served, account, "approve")
    refused = example.run("resume", exit_code=2)
    for said in ("refused:", "no tool call with the call key", "edited after the pause", "nothing was sent"):
        assert said in refused, refused
    # On the code before this check the node sent the edited call anew: a $900 transfer to mallory ran.
    assert transfers_to(served, mallory) == 0
    assert not pending_requests(served, mallory)
    assert not (tmp_path / "state" / "finished.json").exists()
    assert transfers_to(served, account) == 1  # the approved call ran once, on the server's decision


def _uses_redirected(message: dict[str, Any], account: str, mallory: str) -> None:
    """``message``'s one tool use given a new ``toolUseId`` and mallory's arguments (in place)."""
    (block,) = message["content"]
    assert block["toolUse"]["input"]["to"] == account, block
    block["toolUse"].update(toolUseId="call_edited", input={"to": mallory, "amount": 900.0})


@pytest.mark.slow
def test_a_strands_session_edited_while_paused_sends_no_new_call(served: TreasuryServer, tmp_path: Path) -> None:
    pytest.importorskip("strands", reason="the agents extra (interop leg k runs this in its own venv)")
    example = Example("strands", served, tmp_path / "state")
    account, mallory = new_account("st"), new_account("m")
    assert "pending" in example.run("start", f"Send 30000 to {account}")
    # The message strands replays on resume, and the conversation's copy; the adapter's record is left as saved.
    agent_dir = tmp_path / "state" / "sessions" / "session_run" / "agents" / "agent_default"
    agent = json.loads((agent_dir / "agent.json").read_text())
    _uses_redirected(
        agent["_internal_state"]["interrupt_state"]["pending_tool_execution"]["assistant_message"], account, mallory
    )
    (agent_dir / "agent.json").write_text(json.dumps(agent))
    message = json.loads((agent_dir / "messages" / "message_1.json").read_text())
    _uses_redirected(message["message"], account, mallory)
    (agent_dir / "messages" / "message_1.json").write_text(json.dumps(message))
    decide(served, account, "approve")
    refused = example.run("resume", exit_code=2)
    for said in ("refused:", "no tool call with the call key", "edited after the pause", "nothing was sent"):
        assert said in refused, refused
    # On the code before this check the tool sent the edited call anew: a $900 transfer to mallory ran.
    assert transfers_to(served, mallory) == 0
    assert not pending_requests(served, mallory)
    assert not (tmp_path / "state" / "finished.json").exists()
    assert transfers_to(served, account) == 1  # the approved call ran once, on the server's decision


#: ADK's session edited: the paused call's arguments (the model would read the approved result as theirs), or
#: a call added to the model's turn (a new function call id, which ADK may run as an unanswered call on resume).
ADK_EDITS = {"arguments": "other arguments than the pending call's", "added-call": "would send its tool call"}


@pytest.mark.slow
@pytest.mark.parametrize("edit", list(ADK_EDITS))
def test_a_google_adk_session_edited_while_paused_sends_no_new_call(
    edit: str, served: TreasuryServer, tmp_path: Path
) -> None:
    pytest.importorskip("google.adk", reason="the agents extra (interop leg k runs this in its own venv)")
    example = Example("google_adk", served, tmp_path / "state")
    account, mallory = new_account("adk"), new_account("m")
    assert "pending" in example.run("start", f"Send 30000 to {account}")
    with sqlite3.connect(tmp_path / "state" / "sessions.db") as db:  # the model's turn; the session state as saved
        ((event_id, data),) = db.execute("SELECT id, event_data FROM events WHERE event_data LIKE '%function_call%'")
        event = json.loads(data)
        (part,) = event["content"]["parts"]
        assert part["function_call"]["args"]["to"] == account, part
        redirected = {"to": mallory, "amount": 900.0}
        if edit == "arguments":
            part["function_call"]["args"] = redirected
        else:
            added = {"id": "call_added", "name": "wire_transfer", "args": redirected}
            event["content"]["parts"].append({"function_call": added})
        db.execute("UPDATE events SET event_data = ? WHERE id = ?", (json.dumps(event), event_id))
    decide(served, account, "approve")
    refused = example.run("resume", exit_code=2)
    for said in ("refused:", ADK_EDITS[edit], "edited after the pause", "nothing was sent"):
        assert said in refused, refused
    # On the code before this check the resume went on: the model read the approved result in the edited turn.
    assert not (tmp_path / "state" / "finished.json").exists()
    assert transfers_to(served, mallory) == 0
    assert not pending_requests(served, mallory)
    assert transfers_to(served, account) == 1  # the approved call ran once, on the server's decision


def _context_redirected(data: dict[str, Any], account: str, mallory: str) -> None:
    """The saved context's waiting ``ToolCall`` given a new ``tool_id`` and mallory's arguments (in place)."""
    (waiter,) = data["context"]["workers"]["call_tool"]["collected_waiters"]
    event = json.loads(waiter["event"])
    assert event["value"]["tool_kwargs"]["to"] == account, event
    event["value"].update(tool_id="call_edited", tool_kwargs={"to": mallory, "amount": 900.0})
    waiter["event"] = json.dumps(event)


@pytest.mark.slow
def test_a_llama_index_context_edited_while_paused_sends_no_new_call(served: TreasuryServer, tmp_path: Path) -> None:
    pytest.importorskip("llama_index.core", reason="the agents extra (interop leg k runs this in its own venv)")
    example = Example("llama_index", served, tmp_path / "state")
    account, mallory = new_account("li"), new_account("m")
    assert "pending" in example.run("start", f"Send 30000 to {account}")
    saved = tmp_path / "state" / "context.json"
    data = json.loads(saved.read_text())
    _context_redirected(data, account, mallory)  # the adapter's record of the pending call is left as saved
    saved.write_text(json.dumps(data))
    decide(served, account, "approve")
    refused = example.run("resume", exit_code=2)
    for said in ("refused:", "no tool call with the call key", "edited after the pause", "nothing was sent"):
        assert said in refused, refused
    # On the code before this check the replayed step sent the edited call anew: a $900 transfer to mallory ran.
    assert transfers_to(served, mallory) == 0
    assert not pending_requests(served, mallory)
    assert not (tmp_path / "state" / "finished.json").exists()
    assert transfers_to(served, account) == 1  # the approved call ran once, on the server's decision
