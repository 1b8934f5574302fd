"""Every ``--help`` of the command line says what its code says: no word lost, no gap left.

The commands are found by walking the typer app (groups loaded lazily included), so a new command or
subcommand is checked without being listed here. Each page is rendered as a user sees it, and
checked twice: against the text the code wrote (every command's and option's help appears word for
word), and for what a markup parser leaves when it takes ``[...]`` for a style (an empty ``[]`` or
``()``, two spaces inside a sentence, a space before a full stop or comma).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from mcp_approval.cli.main import app

#: What a lost ``[word]`` leaves in a rendered page: brackets with nothing inside, two spaces between
#: words of a sentence (not the gap between an option column and its help: that follows a capital,
#: a digit or a closing bracket, and the help after it starts with a capital), a space before a stop.
_REMNANTS = {
    "empty brackets": re.compile(r"\[\s*\]|\(\s*\)"),
    "two spaces inside a sentence": re.compile(r"[a-z,;:]  +[a-z]"),
    "a space before a full stop or comma": re.compile(r"\w +[.,](?:\s|$)"),
}
_WIDTH = 200
#: A line wrapped after a hyphen inside a word ("url-" then "mode" on the next line).
_WRAPPED_HYPHEN = re.compile(r"(\w-)\s*\n\s*(?=\w)")
#: Characters of the page's layout (box drawing), not of any help text.
_LAYOUT = re.compile(r"[\u2500-\u257f]")


def _commands() -> Iterator[tuple[list[str], Any]]:
    """Every command and subcommand of the app, with the words that name it, the app first.

    (Commands are typer's click classes, which recent typer releases vendor: ``Any`` keeps them out
    of sight, and a group is what lists commands.)
    """
    root = typer.main.get_command(app)

    def walk(path: list[str], command: Any) -> Iterator[tuple[list[str], Any]]:
        yield path, command
        if hasattr(command, "list_commands"):
            context = typer.Context(command, info_name=path[-1] if path else "mcp-approval")
            for name in command.list_commands(context):
                child = command.get_command(context, name)
                assert child is not None, f"{' '.join([*path, name])} is listed but not found"
                yield from walk([*path, name], child)

    yield from walk([], root)


COMMANDS = list(_commands())


def _help_page(path: list[str]) -> str:
    """The page ``mcp-approval PATH --help`` prints, on a terminal wide enough that few sentences wrap."""
    runner = CliRunner(env={"COLUMNS": str(_WIDTH)})
    result = runner.invoke(app, [*path, "--help"], prog_name="mcp-approval", terminal_width=_WIDTH)
    assert result.exit_code == 0, result.output
    return result.output


def _written(command: Any) -> list[str]:
    """The help texts the code gives this command and its options (what typer shows before a ``\\f``)."""
    texts = [command.help or ""] + [getattr(param, "help", None) or "" for param in command.params]
    return [text.partition("\f")[0] for text in texts if text.strip()]


def _words(text: str) -> list[str]:
    """The words of a text or a page, a word the page wrapped after its hyphen joined again."""
    text = _LAYOUT.sub(" ", text).replace("\b", " ")
    return _WRAPPED_HYPHEN.sub(r"\1", text).split()


def _contains(words: list[str], part: list[str]) -> bool:
    return any(words[start : start + len(part)] == part for start in range(len(words) - len(part) + 1))


def test_the_walk_finds_the_lazily_loaded_groups_and_their_subcommands() -> None:
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {"", "serve", "review", "review list", "audit", "audit verify", "demo"} <= names


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[" ".join(path) or "mcp-approval" for path, _ in COMMANDS])
def test_a_help_page_shows_every_word_its_code_wrote(path: list[str], command: Any) -> None:
    page = _words(_help_page(path))
    lost = [text for text in _written(command) if not _contains(page, _words(text))]
    assert lost == [], f"mcp-approval {' '.join(path)} --help does not show these as written"


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[" ".join(path) or "mcp-approval" for path, _ in COMMANDS])
def test_a_help_page_has_no_gap_a_lost_word_leaves(path: list[str], command: Any) -> None:
    page = _LAYOUT.sub(" ", _help_page(path))
    found = [
        f"{what}: {line.strip()!r}"
        for line in page.splitlines()
        for what, pattern in _REMNANTS.items()
        if pattern.search(line)
    ]
    assert found == []


@pytest.mark.parametrize(
    ("page", "remnant"),
    [
        ("  --db TEXT  Store URL; overrides .", "a space before a full stop or comma"),
        ("  --anchor TEXT  SEQ:HASH, a line an  wrote, or its file", "two spaces inside a sentence"),
        ("  --db TEXT  overrides the configuration's [] url", "empty brackets"),
    ],
)
def test_each_remnant_is_seen_in_a_line_that_has_it(page: str, remnant: str) -> None:
    assert _REMNANTS[remnant].search(page)


def test_the_column_gap_of_an_option_is_not_taken_for_a_remnant() -> None:
    lines = [
        "  --port INTEGER  TCP port.  [default: 8000]",
        "  --json          Print JSON instead of a table.",
        "  --limit INTEGER RANGE  Requests per page.  [default: 200; 1<=x<=200]",
        "  review  Review approval requests of the local backend: list, show,...",
    ]
    assert [line for line in lines for pattern in _REMNANTS.values() if pattern.search(line)] == []


def test_the_demo_help_names_every_scenario_of_the_catalog() -> None:
    from mcp_approval.demo.catalog import SCENARIOS

    page = " ".join(CliRunner().invoke(app, ["demo", "--help"], terminal_width=200).output.split())
    page = re.sub(r"(\w)- (\w)", r"\1-\2", page)  # a line the page wrapped after a hyphen
    missing = [f"{s.number} {s.name}" for s in SCENARIOS if f"{s.number} {s.name}" not in page]
    assert missing == [], f"demo --help does not name: {missing}"
