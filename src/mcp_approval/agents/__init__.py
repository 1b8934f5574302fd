"""Agent frameworks: an MCP server's tools in a framework, with a pending approval as the framework's own pause.

Public here: :class:`ApprovalTools` (the framework-neutral calls and the wait for a decision),
:class:`PendingCall` (what a pause carries) and :func:`call_key_for`. One module per framework, each
importing its framework when it is imported (the ``agents`` extra installs them all):

- :mod:`mcp_approval.agents.pydantic_ai`: deferred tools (``DeferredToolRequests`` / ``DeferredToolResults``);
- :mod:`mcp_approval.agents.langgraph`: ``interrupt()`` and ``Command(resume=...)`` with a checkpointer;
- :mod:`mcp_approval.agents.openai_agents`: ``needs_approval``, ``interruptions`` and a serialized ``RunState``;
- :mod:`mcp_approval.agents.google_adk`: long-running tools, the pending call in the session state, and
  Resume by invocation id.
"""

from mcp_approval.agents.core import DECIDED_BY, ApprovalTools, PendingCall, call_key_for, result_text

__all__ = ["DECIDED_BY", "ApprovalTools", "PendingCall", "call_key_for", "result_text"]
