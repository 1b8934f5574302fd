"""Text from outside made safe to print on a terminal.

A server, a client or a file can put bytes in a string that a terminal acts on instead of
showing: ESC sequences that recolour or erase lines (CSI), set the window title or write the
clipboard (OSC 0, OSC 52), hide a link behind other text (OSC 8), and bidirectional controls that
make text read in another order than it is stored. :func:`terminal_text` turns every such
character into a visible escape, so the reader sees what was sent and the terminal does nothing.
The same helper, with ``lines=False``, makes a caller's string safe to echo in model-facing text:
there a newline could start what reads as another instruction, so it is escaped too.

:func:`storable` says whether a caller's identifier is text every store can hold: PostgreSQL
cannot store or compare a NUL character or a lone surrogate, so such an id names nothing.
"""

from __future__ import annotations

__all__ = ["storable", "terminal_text"]

#: Bidirectional formatting characters: the embeddings and overrides U+202A-U+202E, the isolates
#: U+2066-U+2069, and the marks U+200E, U+200F and U+061C; also the line and paragraph separators
#: U+2028 and U+2029, which some terminals and editors break lines at.
_FORMATTING = frozenset([*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C, 0x2028, 0x2029])
#: Kept as they are: the line breaks and indents of the text itself.
_KEPT = frozenset({0x0A, 0x09})


def _escaped(code: int) -> str:
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _unsafe(code: int, kept: frozenset[int] = _KEPT) -> bool:
    if code in kept:
        return False
    # C0 (and DEL), C1: ESC (0x1B) starts CSI and OSC; 0x9B and 0x9D are their 8-bit forms.
    return code < 0x20 or 0x7F <= code <= 0x9F or code in _FORMATTING


def terminal_text(text: str, *, lines: bool = True) -> str:
    """``text`` with every control character made visible, ready for a terminal (or a model).

    C0 and C1 control characters (except newline and tab; with ``lines=False`` those too, for a
    caller's string echoed inside a sentence), DEL and the bidirectional formatting
    characters become escapes such as ``\\x1b`` and ``\\u202e``; an ESC sequence therefore shows
    as text (``\\x1b[31m``, ``\\x1b]0;title\\x07``) and is never acted on. Everything else,
    including other non-ASCII text, is unchanged.

    >>> terminal_text("\\x1b[32mPASS\\x1b[0m \\u202eevil")
    '\\\\x1b[32mPASS\\\\x1b[0m \\\\u202eevil'
    """
    kept = _KEPT if lines else frozenset()
    if all(not _unsafe(ord(char), kept) for char in text):
        return text
    return "".join(_escaped(ord(char)) if _unsafe(ord(char), kept) else char for char in text)


def storable(text: str) -> bool:
    """Whether ``text`` can be stored and compared by every store (no NUL, no lone surrogate).

    An identifier a caller sends that is not (``"task\x00"``) names nothing: it is answered as
    an unknown one without asking the store, so both stores answer alike.
    """
    return "\x00" not in text and not any(0xD800 <= ord(char) <= 0xDFFF for char in text)
