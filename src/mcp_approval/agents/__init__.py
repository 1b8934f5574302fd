"""Agent frameworks: MCP servers' tools in a framework, with a pending approval as the framework's own pause.

Public here: :class:`ApprovalTools` (one server's calls and the wait for a decision),
:class:`ApprovalServers` (several servers in one agent: prefixed tool names, one status tool, each
pending call resumed on its own server), :class:`PendingCall` (what a pause carries),
:class:`ServerTool` and :func:`call_key_for`. One module per framework, each importing its framework
when it is imported (the ``agents`` extra installs them all):

- :mod:`mcp_approval.agents.pydantic_ai`: deferred tools (``DeferredToolRequests`` / ``DeferredToolResults``);
- :mod:`mcp_approval.agents.langgraph`: ``interrupt()`` and ``Command(resume=...)`` with a checkpointer;
- :mod:`mcp_approval.agents.openai_agents`: ``needs_approval``, ``interruptions`` and a serialized ``RunState``;
- :mod:`mcp_approval.agents.google_adk`: long-running tools, the pending call in the session state, and
  Resume by invocation id;
- :mod:`mcp_approval.agents.strands`: tool interrupts, resumed with ``interruptResponse`` s;
- :mod:`mcp_approval.agents.llama_index`: agent workflows waiting for a ``HumanResponseEvent``, with
  the workflow's serialized context.
"""

from mcp_approval.agents.core import (
    DECIDED_BY,
    ApprovalTools,
    PendingCall,
    ServerTool,
    ToolCaller,
    call_key_for,
    result_text,
)
from mcp_approval.agents.servers import STATUS_TOOL, ApprovalServers, ServerNotGivenError, Servers

__all__ = [
    "DECIDED_BY",
    "STATUS_TOOL",
    "ApprovalServers",
    "ApprovalTools",
    "PendingCall",
    "ServerNotGivenError",
    "ServerTool",
    "Servers",
    "ToolCaller",
    "call_key_for",
    "result_text",
]
