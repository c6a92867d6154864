"""Sections of a generated document that a command of their own writes.

BEYOND.md is rendered from the sweeps (`report.beyond`), but two of its sections come from
commands with runs of their own: "Which detector?" (`detectors.which_detector --beyond`) and the
learned policies over training seeds (`rl.learned_seeds --beyond`). Each sits between
`<!-- NAME:start -->` and `<!-- NAME:end -->`; its command replaces it in place, and re-rendering
the document carries it over, so no command erases another's measurements.
"""

from __future__ import annotations

import re
from pathlib import Path

from .durable import write_text
from .usage import UsageError

WHICH_DETECTOR, LEARNED_SEEDS = "which-detector", "learned-seeds"
OWNED = (WHICH_DETECTOR, LEARNED_SEEDS)   # BEYOND.md's sections other commands write


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def _pattern(name: str) -> re.Pattern[str]:
    start, end = markers(name)
    return re.compile(re.escape(start) + ".*?" + re.escape(end) + "\n?", re.S)


def wrap(name: str, body: str) -> str:
    """`body` between the section's markers."""
    start, end = markers(name)
    return f"{start}\n{body.strip(chr(10))}\n{end}\n"


def find(text: str, name: str) -> str | None:
    """The marked section `name` of `text`, markers included, or None."""
    found = _pattern(name).search(text)
    return found.group(0) if found else None


def replace(text: str, name: str, section: str) -> str:
    """`text` with section `name` replaced by `section` (appended when it has none)."""
    pattern = _pattern(name)
    if pattern.search(text):
        return pattern.sub(lambda _: section, text, count=1)
    return text.rstrip("\n") + "\n\n" + section


def carried_over(text: str, old: Path, names: tuple[str, ...] = OWNED) -> str:
    """`text` carrying the sections `names` of the document it replaces (`old`, if any)."""
    previous = old.read_text(encoding="utf-8") if old.is_file() else ""
    for name in names:
        section = find(previous, name)
        if section is not None:
            text = replace(text, name, section)
    return text


def check_document(path: Path, option: str) -> Path:
    """The document a command will write its section into: it must exist (the section lives
    inside it). Checked before any work starts."""
    if not path.is_file():
        raise UsageError(f"{option} {path}: no such file; give the document the section is "
                         "written into (e.g. BEYOND.md)")
    return path


def write_into(path: Path, name: str, section: str) -> None:
    """Replace section `name` of the document at `path`, atomically."""
    write_text(path, replace(path.read_text(encoding="utf-8"), name, section))
