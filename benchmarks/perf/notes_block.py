"""A benchmark's own block of PERFORMANCE.md, below the notes marker.

`evalstop-bench perf` regenerates the file above the notes marker and keeps the text below it;
a benchmark with its own command (the live monitor's, the env throughput's) writes its figures
there, between markers of its own, so each command refreshes its block and nothing else.
"""

from __future__ import annotations

from pathlib import Path

from ..durable import write_text
from .engine import NOTES_MARKER


def markers(name: str) -> tuple[str, str]:
    """The begin and end markers of block `name`."""
    return f"<!-- {name}: begin -->", f"<!-- {name}: end -->"


def marked(name: str, title: str, lines: list[str]) -> str:
    """The block: its markers around a section titled `title`."""
    begin, end = markers(name)
    return "\n".join([begin, "", f"## {title}", "", *lines, "", end])


def write_block(path: Path, name: str, text: str) -> None:
    """Put `text` in place of block `name`, else right after the notes marker; atomically."""
    begin, end = markers(name)
    current = path.read_text() if path.exists() else f"{NOTES_MARKER}\n"
    if begin in current and end in current:
        head, rest = current.split(begin, 1)
        updated = head + text + rest.split(end, 1)[1]
    elif NOTES_MARKER in current:
        head, tail = current.split(NOTES_MARKER, 1)
        updated = f"{head}{NOTES_MARKER}\n\n{text}\n{tail}"
    else:
        updated = f"{current.rstrip()}\n\n{NOTES_MARKER}\n\n{text}\n"
    write_text(path, updated)
