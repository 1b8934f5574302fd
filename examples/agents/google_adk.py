"""Google ADK: a pending approval pauses the resumable invocation; ``resume`` answers it by invocation id.

    python examples/agents/google_adk.py --url http://127.0.0.1:8000/mcp --token alice-token \\
        --state /tmp/run-1 --scripted start "Send 30000 to acme"
    python examples/agents/google_adk.py --url ... --token alice-token --state /tmp/run-1 --scripted resume

A resumable ``App`` with its sessions in ``DIR/sessions.db`` (``SqliteSessionService``) and the
session id in ``DIR/session``. ``start`` runs the agent; a call waiting for approval leaves the
invocation paused and the pending call in the session state, and the pending reference is printed.
``resume`` waits for the decision and resumes the invocation with the call's function response,
printing the tool's result text (a session with nothing pending is not resumed). Several servers:
``--url a=URL --url b=URL`` (the tools ``a_wire_transfer``, ...). ``--scripted`` plays the model
with a scripted ``BaseLlm``; without it the model is ``$ADK_MODEL`` (default ``gemini-2.5-flash``,
reading ``GOOGLE_API_KEY``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import uuid
import warnings
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.apps import App, ResumabilityConfig
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.genai import types

from mcp_approval.agents.google_adk import approval_tools, pending_calls, resume_message

sys.path.append(str(Path(__file__).resolve().parent))
from scripted import connect, finished_before, options, record_finished, refused, report, scripted_calls

APP, USER = "treasury_agent", "alice"
warnings.filterwarnings("ignore", message=r"\[EXPERIMENTAL\] ResumabilityConfig")  # Resume is ADK's own pause


class ScriptedModel(BaseLlm):
    """Calls the tools the user's prompt asks for; after their function responses, reports what they returned
    (a pending first answer: that the call waits for approval)."""

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        responses = [
            part.function_response.response or {}
            for part in llm_request.contents[-1].parts or []
            if part.function_response is not None
        ]
        if responses:
            texts = [r["text"] if r.get("status") == "pending" else response_text(r) for r in responses]
            parts = [types.Part(text=report(texts))]
        else:
            prompt = next(
                part.text for content in reversed(llm_request.contents) for part in content.parts or [] if part.text
            )
            parts = [
                types.Part(function_call=types.FunctionCall(id=f"call_{uuid.uuid4().hex}", name=tool, args=arguments))
                for tool, arguments in scripted_calls(prompt)
            ]
        yield LlmResponse(content=types.Content(role="model", parts=parts))


def response_text(response: dict[str, Any]) -> str:
    """The text blocks of a function response that is a whole ``CallToolResult``."""
    content = response.get("content") or []
    texts = [block.get("text", "") for block in content if isinstance(block, dict) and block.get("type") == "text"]
    return "\n".join(texts) if texts else json.dumps(response)


def tool_results(session: Any) -> list[str]:
    """The texts of the latest function responses to the model's latest calls (a pending first answer is not one)."""
    calls: list[str] = []
    answers: dict[str, str] = {}
    for event in session.events:
        parts = (event.content.parts or []) if event.content is not None else []
        asked = [part.function_call.id or "" for part in parts if part.function_call is not None]
        if asked:
            calls, answers = asked, {}
        for part in parts:
            response = part.function_response
            if response is not None and response.response and response.response.get("status") != "pending":
                answers[response.id or ""] = response_text(response.response)
    return [answers[call] for call in calls if call in answers]


async def main() -> int:
    logging.getLogger("google_adk").setLevel(logging.ERROR)  # a warning per model turn without token counts
    opts = options("Google ADK agent whose MCP approvals pause the invocation")
    session_file = opts.state / "session"
    if finished_before(opts, session_file):  # its recorded result was printed; nothing is called
        return 0
    sessions = SqliteSessionService(str(opts.state / "sessions.db"))
    async with connect(opts) as servers:
        model: BaseLlm | str = (
            ScriptedModel(model="scripted") if opts.scripted else os.environ.get("ADK_MODEL", "gemini-2.5-flash")
        )
        agent = LlmAgent(name="treasurer", model=model, tools=await approval_tools(servers))
        app = App(name=APP, root_agent=agent, resumability_config=ResumabilityConfig(is_resumable=True))
        runner = Runner(app=app, session_service=sessions)
        if opts.command == "start":
            session = await sessions.create_session(app_name=APP, user_id=USER)
            session_file.write_text(session.id)
            message = types.Content(role="user", parts=[types.Part(text=opts.prompt)])
            async for _ in runner.run_async(user_id=USER, session_id=session.id, new_message=message):
                pass
        else:
            session_id = session_file.read_text()
            session = await sessions.get_session(app_name=APP, user_id=USER, session_id=session_id)
            for pending in pending_calls(session):
                print(f"waiting {pending.reference}", flush=True)
            resume = await resume_message(servers, session)  # waits for the decisions, each on its server
            if resume is None:
                print("nothing is pending in this session: nothing to resume")
                return 0
            async for _ in runner.run_async(
                user_id=USER,
                session_id=session_id,
                invocation_id=resume.invocation_id,
                new_message=resume.message,
                state_delta=resume.state_delta,
            ):
                pass
        session = await sessions.get_session(app_name=APP, user_id=USER, session_id=session_file.read_text())
    waiting = pending_calls(session)
    if waiting:
        for pending in waiting:
            print(f"pending {pending.reference}")
            print(pending.text())
        return 0
    text = "\n".join(tool_results(session))
    messages = [event.content.model_dump(mode="json", exclude_none=True) for event in session.events if event.content]
    record_finished(opts.state, text, messages)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(refused(main)()))
