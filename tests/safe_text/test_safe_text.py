"""``terminal_text``: nothing a terminal acts on gets through, and ordinary text is left alone."""

from __future__ import annotations

import ast
import re
import unicodedata
from pathlib import Path

import pytest

from mcp_approval.safe_text import terminal_text

BIDI = [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]
#: What no output may keep: every C0 and C1 control but newline and tab, DEL, and the bidi controls.
FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@pytest.mark.parametrize("code", [c for c in range(0x00, 0xA0) if c not in (0x09, 0x0A) and (c < 0x20 or c >= 0x7F)])
def test_every_c0_and_c1_control_is_shown_as_an_escape(code: int) -> None:
    shown = terminal_text(f"a{chr(code)}b")
    assert shown == f"a\\x{code:02x}b"
    assert not FORBIDDEN.search(shown)


@pytest.mark.parametrize("code", BIDI)
def test_every_bidi_embedding_override_and_isolate_is_shown_as_an_escape(code: int) -> None:
    assert unicodedata.category(chr(code)) == "Cf"
    assert terminal_text(f"pay {chr(code)}olleh") == f"pay \\u{code:04x}olleh"


@pytest.mark.parametrize(
    ("sent", "shown"),
    [
        # CSI: a fake green PASS, a cursor move up and a line erase.
        ("\x1b[32mPASS\x1b[0m", "\\x1b[32mPASS\\x1b[0m"),
        ("\x1b[1A\x1b[2K", "\\x1b[1A\\x1b[2K"),
        ("\x9b31m", "\\x9b31m"),  # the 8-bit CSI
        # OSC 0: the window title, ended by BEL or by ST.
        ("\x1b]0;owned\x07", "\\x1b]0;owned\\x07"),
        ("\x1b]0;owned\x1b\\", "\\x1b]0;owned\\x1b\\"),
        # OSC 8: a link hidden behind other text.
        (
            "\x1b]8;;https://evil.example\x1b\\safe\x1b]8;;\x1b\\",
            "\\x1b]8;;https://evil.example\\x1b\\safe\\x1b]8;;\\x1b\\",
        ),
        # OSC 52: writes the clipboard.
        ("\x1b]52;c;cm0gLXJmIH4=\x07", "\\x1b]52;c;cm0gLXJmIH4=\\x07"),
        ("\x9d52;c;eA==\x9c", "\\x9d52;c;eA==\\x9c"),  # 8-bit OSC and ST
        # The marks and separators that reorder or break lines.
        ("a\u200eb\u200fc\u061cd", "a\\u200eb\\u200fc\\u061cd"),
        ("one\u2028two\u2029three", "one\\u2028two\\u2029three"),
        ("carriage\rreturn", "carriage\\x0dreturn"),
    ],
    ids=[
        "csi-colour",
        "csi-erase",
        "csi-8bit",
        "osc0-bel",
        "osc0-st",
        "osc8",
        "osc52",
        "osc52-8bit",
        "marks",
        "seps",
        "cr",
    ],
)
def test_escape_sequences_are_shown_not_acted_on(sent: str, shown: str) -> None:
    assert terminal_text(sent) == shown
    assert "\x1b" not in terminal_text(sent)


@pytest.mark.parametrize(
    "text",
    ["", "plain ascii", "line one\n\tindented", "Überweisung €30 000 an José", "日本語", "emoji 🙂", "back\\slash"],
)
def test_ordinary_text_newlines_and_tabs_are_unchanged(text: str) -> None:
    assert terminal_text(text) == text


def test_no_character_of_the_basic_plane_that_a_terminal_acts_on_gets_through() -> None:
    everything = "".join(chr(code) for code in range(0x10000) if not 0xD800 <= code <= 0xDFFF)
    assert not FORBIDDEN.search(terminal_text(everything))


def test_the_module_imports_nothing_of_the_package() -> None:
    """Rung 0: every command and the conformance kit may use it."""
    source = Path(terminal_text.__code__.co_filename).read_text(encoding="utf-8")
    imported = {
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert imported <= {"__future__"}, imported
