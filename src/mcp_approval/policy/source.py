"""Source files of a Cedar PDP: load errors that name file and line, and Cedar text scanning.

Cedar's parser reports *what* is wrong ("unexpected token `}`") but not *where*. The location
is recovered here without a second parser:

- The policy text is split into statements at top-level ``;`` (outside strings and ``//``
  comments); statement *n* is Cedar's positional policy id ``policy<n>``.
- A syntax error is placed with the viable-prefix property of Cedar's LR parser: a prefix of
  the text that ends before the offending token fails only with "unexpected end of input",
  while every prefix that contains it fails with a different error. A binary search over
  line ends finds the first line whose prefix fails for another reason.
- Errors that Cedar reports for a whole policy (unknown method, duplicate annotation, schema
  validation) are placed on the first line of that policy that mentions a name quoted in the
  message, or on the policy's first line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from mcp_approval.errors import MCPApprovalError

__all__ = [
    "LoadIssue",
    "PolicyLoadError",
    "Statement",
    "TextSource",
    "error_line",
    "find_line",
    "names_in_message",
    "parse_duration",
    "split_statements",
    "statement_at_line",
]

_EOF_MESSAGE = "unexpected end of input"
_QUOTED_NAME = re.compile(r"`([^`]+)`")
_ANNOTATION_NAME = re.compile(r"@[A-Za-z_][A-Za-z0-9_]*")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)*")
_POLICY_ID = re.compile(r"policy\d+")
_ID_ANNOTATION = re.compile(r'@id\s*\(\s*"((?:[^"\\]|\\.)*)"\s*\)')
_DURATION = re.compile(r"^P(?:(?P<w>\d+)W)?(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+)S)?)?$")


@dataclass(frozen=True)
class LoadIssue:
    """One problem found while loading a policy, entities or schema file."""

    path: str
    line: int | None
    detail: str
    policy_id: str | None = None

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: policy {self.policy_id}: {self.detail}" if self.policy_id else f"{where}: {self.detail}"


class PolicyLoadError(MCPApprovalError):
    """A policy set, entities file or schema could not be loaded.

    The message names the file and line (and the policy, when the problem is in one) of every
    issue; the first issue is also available as attributes.
    """

    def __init__(self, issues: Sequence[LoadIssue]) -> None:
        if not issues:
            raise ValueError("PolicyLoadError needs at least one issue")
        self.issues = tuple(issues)
        first = self.issues[0]
        self.path = first.path
        self.line = first.line
        self.policy_id = first.policy_id
        self.detail = first.detail
        super().__init__("\n".join(str(issue) for issue in self.issues))


@dataclass(frozen=True)
class TextSource:
    """The text of one input and the name it is reported under (a file path, or ``<string>``)."""

    text: str
    name: str = "<string>"

    @classmethod
    def read(cls, path: str | Path) -> TextSource:
        """Read a UTF-8 file; an unreadable file is a :class:`PolicyLoadError` naming it."""
        try:
            return cls(Path(path).read_text(encoding="utf-8"), str(path))
        except (OSError, UnicodeDecodeError) as exc:
            raise PolicyLoadError([LoadIssue(str(path), None, f"cannot read: {exc}")]) from exc


@dataclass(frozen=True)
class Statement:
    """One ``;``-terminated statement of a Cedar policy file (1-based, inclusive lines)."""

    index: int
    first_line: int
    last_line: int
    text: str

    @property
    def policy_id(self) -> str:
        """Cedar's positional id of the policy this statement defines."""
        return f"policy{self.index}"

    @property
    def id_annotation(self) -> str | None:
        """The value of the statement's ``@id("...")`` annotation, if any."""
        match = _ID_ANNOTATION.search(self.text)
        return match.group(1) if match else None

    def describe(self) -> str:
        """The policy id, with its ``@id`` annotation when it has one."""
        annotation = self.id_annotation
        return self.policy_id if annotation is None else f'{self.policy_id} (@id "{annotation}")'


@dataclass
class _Scan:
    statements: list[Statement]
    line_end_cuts: list[tuple[int, int]]  # (offset just past a newline outside strings, line number)
    open_string_line: int | None  # where an unterminated string literal starts


def _scan(text: str) -> _Scan:
    """Split Cedar text into statements and find the line ends that are safe to cut at."""
    statements: list[Statement] = []
    cuts: list[tuple[int, int]] = []
    line, start, first_line, string_line = 1, None, 0, 0
    in_string = in_comment = escaped = False
    for offset, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif in_comment:
            in_comment = char != "\n"
        elif char == "/" and text.startswith("//", offset):
            in_comment = True
        elif not char.isspace():
            if start is None:
                start, first_line = offset, line
            if char == '"':
                in_string, string_line = True, line
            elif char == ";":
                statements.append(Statement(len(statements), first_line, line, text[start : offset + 1]))
                start = None
        if char == "\n":
            if not in_string:
                cuts.append((offset + 1, line))
            line += 1
    if start is not None:
        statements.append(Statement(len(statements), first_line, line, text[start:]))
    return _Scan(statements, cuts, string_line if in_string else None)


def split_statements(text: str) -> list[Statement]:
    """The statements of a Cedar policy text, in order (a trailing unterminated one included)."""
    return _scan(text).statements


def statement_at_line(statements: Sequence[Statement], line: int) -> Statement | None:
    """The statement covering ``line``, or the last one that starts before it."""
    candidate = None
    for statement in statements:
        if statement.first_line <= line:
            candidate = statement
    return candidate


def error_line(text: str, parse: Callable[[str], object]) -> int | None:
    """The line of the first error ``parse`` finds in ``text`` (see the module docstring).

    ``parse`` raises ``ValueError`` on invalid input. Returns ``None`` when no prefix ending at a
    line end fails for a reason other than the end of input (the error is then on the last line).
    """

    def fails_before_end(end: int) -> bool:
        try:
            parse(text[:end])
        except ValueError as exc:
            return not str(exc).strip().endswith(_EOF_MESSAGE)
        return False

    scan = _scan(text)
    cuts = scan.line_end_cuts
    low, high = 0, len(cuts)
    while low < high:
        middle = (low + high) // 2
        if fails_before_end(cuts[middle][0]):
            high = middle
        else:
            low = middle + 1
    if low < len(cuts):
        return cuts[low][1]
    if scan.open_string_line is not None:
        return scan.open_string_line
    return text.count("\n") + 1 if text else None


def names_in_message(message: str) -> list[str]:
    """Names a Cedar message quotes (in backticks), mentions as ``@annotation`` or lists after its last colon."""
    names = _QUOTED_NAME.findall(message) + _ANNOTATION_NAME.findall(message)
    if not names and ": " in message:
        # "failed to resolve types: Strin, B" / "invalid policy effect: permitt"
        tail = [part.strip() for part in message.rsplit(": ", 1)[1].split(",")]
        names = [part for part in tail if _NAME.fullmatch(part)]
    return [name for name in names if not _POLICY_ID.fullmatch(name)]


def find_line(
    text: str, needles: Iterable[str], first_line: int = 1, last_line: int | None = None, *, nth: int = 1
) -> int | None:
    """The ``nth`` line in ``first_line..last_line`` that contains one of ``needles`` as a whole token."""
    patterns = [re.compile(rf"(?<![\w:]){re.escape(needle)}(?![\w])") for needle in needles if needle]
    if not patterns:
        return None
    seen = 0
    for number, content in enumerate(text.splitlines(), start=1):
        if number < first_line or (last_line is not None and number > last_line):
            continue
        if any(pattern.search(content) for pattern in patterns):
            seen += 1
            if seen == nth:
                return number
    return None


def parse_duration(value: str) -> timedelta:
    """Parse an ISO 8601 duration of weeks, days, hours, minutes and seconds (``P1D``, ``PT15M``).

    Years and months are refused: their length depends on the calendar.
    """
    match = _DURATION.match(value.strip())
    if not match or value.strip() in {"P", "PT"} or value.strip().endswith("T"):
        raise ValueError(f"not an ISO 8601 duration of weeks/days/hours/minutes/seconds: {value!r}")
    parts = {key: int(number) for key, number in match.groupdict().items() if number is not None}
    duration = timedelta(
        weeks=parts.get("w", 0),
        days=parts.get("d", 0),
        hours=parts.get("h", 0),
        minutes=parts.get("m", 0),
        seconds=parts.get("s", 0),
    )
    if duration <= timedelta(0):
        raise ValueError(f"duration must be positive: {value!r}")
    return duration
