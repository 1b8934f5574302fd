"""Every use of the MCP SDK's private attributes, in one place, named after what it answers.

The SDK's :class:`~mcp.server.mcpserver.MCPServer` offers no public lookup of one registered tool
(``list_tools`` builds the wire listing of every tool) and no public registration of a request
handler for a spec method it does not wire itself (``logging/setLevel``, ``resources/subscribe``).
Both live behind private attributes: ``_tool_manager`` and ``_lowlevel_server``. An SDK release may
rename either without notice, so nothing else in the package reads them: it asks these functions.

:data:`CHECKED_SDK_VERSIONS` is the range of SDK versions these were read against;
``tests/test_sdk_adapter.py`` fails outside it, so that an SDK upgrade makes someone read the
SDK's source again (and drop a function here once the SDK has public API for it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, TypeVar

from pydantic import BaseModel

if TYPE_CHECKING:
    from mcp.server.lowlevel.server import RequestHandler
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.tools import Tool

__all__ = ["CHECKED_SDK_VERSIONS", "add_request_handler", "registered_tool"]

#: The MCP SDK versions (``mcp`` on PyPI) this module was checked against: at least the first, below the second.
CHECKED_SDK_VERSIONS: Final = ((2, 3, 0), (2, 4, 0))

_ParamsT = TypeVar("_ParamsT", bound=BaseModel)


def registered_tool(server: MCPServer[Any], name: str) -> Tool | None:
    """The tool ``server`` has registered as ``name`` (its function, schemas, argument model), or ``None``."""
    return server._tool_manager.get_tool(name)


def add_request_handler(
    server: MCPServer[Any], method: str, params_type: type[_ParamsT], handler: RequestHandler[Any, _ParamsT]
) -> None:
    """Answer requests for ``method`` on ``server`` with ``handler``, their params validated as ``params_type``.

    For spec methods ``MCPServer`` has no decorator for; it replaces a handler already there.
    """
    server._lowlevel_server.add_request_handler(method, params_type, handler)
