"""What both corpus commands (`build`, `public`) write with: the replay CSV text and a checked
`--out` folder."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def to_csv(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """Rows as CSV text; floats by `repr`, so they read back bit for bit."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([repr(row[c]) if isinstance(row[c], float) else row[c] for c in columns])
    return buf.getvalue()


def check_out(out: Path) -> Path:
    """--out, refused when it lies inside the installed package (the shipped corpus is data
    every user's results depend on) or cannot be written."""
    import evalstop_gym
    import evalstop_gym.policies

    from ..usage import UsageError, check_output

    resolved = Path(out).resolve()
    roots = [Path(str(m.__file__)).resolve().parent
             for m in (evalstop_gym, evalstop_gym.policies)]
    for root in [*roots, Path(__file__).resolve().parents[1]]:   # ... and the benchmarks
        if resolved == root or root in resolved.parents:
            raise UsageError(f"--out {out}: inside the installed package ({root}); build into "
                             "a folder of your own (default ./corpus) and copy files over by "
                             "hand to update the shipped corpus")
    return check_output(out, "--out", "dir")
