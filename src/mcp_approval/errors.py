"""The root of every exception this package raises on purpose.

``except MCPApprovalError`` catches anything mcp-approval raised on purpose (a configuration it
refuses, a store it cannot reach, a request a reviewer may not decide, ...) and nothing else: a
bug in a tool, in the SDK or in the package itself surfaces as what it is. Each error keeps its
own class, and the classes that were a ``ValueError`` or a ``RuntimeError`` still are one, so a
caller that catches those keeps working::

    try:
        deployment = build_deployment(load_config(path), base_url=url)
    except MCPApprovalError as exc:
        print(f"cannot start: {exc}")
"""

from __future__ import annotations

__all__ = ["MCPApprovalError"]


class MCPApprovalError(Exception):
    """An error mcp-approval raised on purpose; its subclasses say which."""
