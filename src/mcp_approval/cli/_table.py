"""Plain text tables for the command line: columns padded to their widest cell, nothing else.

The review commands print through this rather than a terminal-rendering library: their output is
read by people and by ``grep``/``awk`` alike, and a listing should not pay for a renderer's import.
A cell with line breaks continues on the next lines, under its own column.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["render_table"]

_GAP = "  "


def render_table(rows: Sequence[Sequence[str]], *, header: Sequence[str] | None = None) -> str:
    """The rows (and the header, underlined, when given) as aligned text, one line per row line."""
    lines_of = [[cell.splitlines() or [""] for cell in row] for row in ([header] if header else []) + list(rows)]
    if not lines_of:
        return ""
    columns = max(len(row) for row in lines_of)
    widths = [
        max((max(len(line) for line in row[i]) for row in lines_of if i < len(row)), default=0) for i in range(columns)
    ]
    out: list[str] = []
    for index, row in enumerate(lines_of):
        height = max(len(cell) for cell in row)
        for depth in range(height):
            cells = [(cell[depth] if depth < len(cell) else "").ljust(widths[i]) for i, cell in enumerate(row)]
            out.append(_GAP.join(cells).rstrip())
        if header and index == 0:
            out.append(_GAP.join("-" * width for width in widths))
    return "\n".join(out)
