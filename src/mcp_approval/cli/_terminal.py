"""Stored and received text on the terminal: escaped, kept to its line, never read as markup.

Whatever the command prints that it did not write itself (a request's arguments, a reviewer's
comment or name, a requester id, a template name, an error naming one, a log line quoting one)
goes through :func:`shown`: :func:`~mcp_approval.safe_text.terminal_text` makes every control
character, ESC sequence and bidirectional control visible, and a line break or tab inside a
one-line field shows as ``\\n``/``\\t``, so no text starts a line of its own (a fake
``carol: deny``). Text printed through rich also goes through :func:`markup_free`, so ``[bold]``
in a comment is printed, not obeyed.
"""

from __future__ import annotations

import logging
import sys

from mcp_approval.safe_text import terminal_text

__all__ = ["TerminalLogFormatter", "configure_logging", "markup_free", "shown", "shown_lines"]


def shown(text: object) -> str:
    """``text`` as one terminal line: controls, bidirectional controls, line breaks and tabs escaped."""
    return terminal_text(str(text)).replace("\n", "\\n").replace("\t", "\\t")


def shown_lines(text: object) -> str:
    """``text`` for the terminal, keeping its line breaks and tabs (e.g. indented JSON): the rest escaped."""
    return terminal_text(str(text))


def markup_free(text: object) -> str:
    """:func:`shown`, with rich's markup escaped: for text printed through a rich console."""
    from rich.markup import escape

    return escape(shown(text))


class TerminalLogFormatter(logging.Formatter):
    """Log lines whose message (with what it quotes) is one escaped line; a traceback keeps its lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        """The line, with the record's message escaped to one line."""
        return shown(super().formatMessage(record))

    def formatException(self, ei: logging._SysExcInfoType) -> str:
        """The traceback, its lines kept, every control in it escaped."""
        return shown_lines(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:
        """The stack, its lines kept, every control in it escaped."""
        return shown_lines(super().formatStack(stack_info))


def configure_logging(level: str) -> None:
    """Log to stderr at ``level`` (stdout may carry the protocol), each line through :class:`TerminalLogFormatter`."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(TerminalLogFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level.upper(), handlers=[handler])
