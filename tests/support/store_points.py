"""The statements each phase of an approval workflow sends to PostgreSQL, as points to break it at.

A recording run (see ``tests/treasury/test_store_faults.py``) notes which statements the proxy
(:mod:`tests.support.store_proxy`) saw while the server was idle and while each phase ran.
:func:`fault_points` turns that into the phase's points: every statement text the phase sends
that the idle server does not, and the ``COMMIT`` of every transaction holding one of them (as a
statement, and as a commit whose answer is lost).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tests.support.store_proxy import Statement, StoreFault

__all__ = ["Point", "fault_points", "transactions"]

_CONTROL = re.compile(r"\s*(BEGIN|COMMIT|ROLLBACK|START|SAVEPOINT|RELEASE)\b", re.IGNORECASE)
#: The audit linker's statements: background work a phase's writes wake, on a timer of its own, so
#: they may fall inside or after a phase (its faults are tested in ``tests/storage/test_audit_linker.py``).
_LINKER = re.compile(r"audit_chain_head|UPDATE audit_events\b|audit_events\.seq IS NULL", re.IGNORECASE)
_COMMIT = r"^\s*COMMIT\b"


@dataclass(frozen=True)
class Point:
    """One statement of a phase to break the store at."""

    phase: str
    text: str
    #: A ``COMMIT``: of the transaction that ran ``text``.
    commit: bool = False
    #: The commit reached the server (it ran); only its answer is lost.
    answered: bool = False

    def fault(self, kind: str) -> StoreFault:
        """The proxy fault of ``kind`` (``cut`` or ``stall``) at this point."""
        exact = f"^{re.escape(self.text)}$"
        if self.commit:
            return StoreFault(kind, _COMMIT, after=exact, answered=self.answered)  # type: ignore[arg-type]
        return StoreFault(kind, exact)  # type: ignore[arg-type]

    def __str__(self) -> str:
        where = f"COMMIT{' (answer lost)' if self.answered else ''} after " if self.commit else ""
        return f"{self.phase}: {where}{' '.join(self.text.split())[:110]}"


def transactions(statements: Iterable[Statement]) -> list[list[str]]:
    """The statement texts of each transaction (per connection, ``BEGIN`` to ``COMMIT``), in commit order."""
    open_by_connection: dict[int, list[str]] = {}
    committed: list[list[str]] = []
    for statement in statements:
        text = statement.text.strip()
        if re.match(r"(BEGIN|START)\b", text, re.IGNORECASE):
            open_by_connection[statement.connection] = []
        elif re.match(r"(COMMIT|ROLLBACK)\b", text, re.IGNORECASE):
            done = open_by_connection.pop(statement.connection, None)
            if done is not None and text.upper().startswith("COMMIT"):
                committed.append(done)
        elif statement.connection in open_by_connection:
            open_by_connection[statement.connection].append(statement.text)
    return committed


def fault_points(phase: str, runs: Sequence[Sequence[Statement]], background: set[str]) -> list[Point]:
    """The points of ``phase``: texts it sent in every recorded run but the idle server never did.

    Each such text is a point; so is the commit of each transaction that ran one (found by a
    statement of it that no other transaction of the phase sends), both as a commit that never
    reaches the server and as one whose answer is lost.
    """
    sets = [{s.text for s in run} for run in runs]
    own = set.intersection(*sets) - background if sets else set()
    own = {text for text in own if not _CONTROL.match(text) and not _LINKER.search(text)}
    points: list[Point] = []
    seen: set[str] = set()
    for statement in runs[0]:
        if statement.text in own and statement.text not in seen:
            seen.add(statement.text)
            points.append(Point(phase, statement.text))
    # A transaction's commit is found by a statement of it that no other transaction of the phase sends.
    mine = [[text for text in transaction if text in own] for transaction in transactions(runs[0])]
    for index, texts in enumerate(mine):
        others = {text for other, held in enumerate(mine) if other != index for text in held}
        marker = next((text for text in texts if text not in others), None)
        if marker is not None:
            points.append(Point(phase, marker, commit=True))
            points.append(Point(phase, marker, commit=True, answered=True))
    return points
