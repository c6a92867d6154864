"""One matplotlib style for every figure a report draws, sized for IEEE / ACM papers.

Why one place: a paper's figures must share fonts, widths and colours, and the submission checks
(IEEE PDF eXpress, ACM's) reject PDFs with Type 3 fonts, which matplotlib embeds by default. `RC`
is a plain rc dict applied through `matplotlib.rc_context` (`@styled` on a drawing function,
`with style():` around a save), so importing this module changes no global state.

Colours are Okabe & Ito's colour-blind-safe palette, keyed by a stop rule's family (the
registry's prefix: `EvalStop` of `EvalStop-2+SRTF-Est`), so a rule keeps its colour and marker
in every figure of a report; variants of one rule in one figure differ by line style, and a base
scheduler alone is drawn in neutral grey.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import matplotlib as mpl
from cycler import cycler

from evalstop_gym.policies.registry import BASES

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

SINGLE = 3.5   # in: one column of a two-column IEEE / ACM page
DOUBLE = 7.0   # in: the full text width (a figure* spanning both columns)
OKABE_ITO = ("#0072B2", "#D55E00", "#009E73", "#E69F00", "#CC79A7", "#56B4E9", "#000000",
             "#F0E442")   # blue, vermillion, green, orange, purple, sky blue, black, yellow
PALE = {"#F0E442"}        # too light on white alone: its markers get a black edge
NEUTRAL = "#999999"       # a base scheduler alone: context for the stop rules, not one of them
MARKERS = ("o", "s", "^", "v", "D", "P", "X", "h", "*", "p")
LINESTYLES = ("-", "--", ":", "-.")
# the registry's detector prefixes, in the order they take the palette (the paper's three first)
FAMILIES = ("EvalStop", "StopAt", "LossPlateau", "Patience", "CUSUM", "BOCPD", "DeclineTest",
            "MedianPruner", "TrendTest", "PeerPrior", "MaterialDecline")
REFERENCE_GID = "reference"   # gid of every artist marking a reference cell (SVG id, tests)
NA_GID = "n/a"                # gid of the text standing in for an undefined (NaN) bar
ZERO_GID = "zero"             # gid of the "0" beside a bar of no width (a measured zero)
FONT_SUBTYPES = frozenset({"Type1", "Type3", "TrueType", "Type0", "CIDFontType0",
                           "CIDFontType2", "MMType1", "OpenType"})

RC: dict[RcKeyType, Any] = {
    "pdf.fonttype": 42,               # TrueType, not Type 3: what IEEE / ACM checks accept
    "ps.fonttype": 42,
    "font.size": 8,                   # 8-9 pt reads at 100% zoom at column width
    "axes.titlesize": 9,
    "figure.titlesize": 9,
    "axes.labelsize": 8,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "legend.fontsize": 8,
    "legend.title_fontsize": 8,
    "legend.frameon": False,
    "axes.prop_cycle": cycler(color=OKABE_ITO),
    "axes.linewidth": 0.6,
    "axes.grid": True,
    "grid.linewidth": 0.4,
    "grid.alpha": 0.4,
    "lines.linewidth": 1.2,
    "lines.markersize": 3.5,
    "errorbar.capsize": 2,
    "hatch.linewidth": 0.6,
    "xtick.major.width": 0.6,
    "ytick.major.width": 0.6,
    "figure.constrained_layout.use": True,   # room for labels and outside legends, no clipping
    "savefig.dpi": 300,               # print resolution for the PNGs
}

F = TypeVar("F", bound=Callable[..., Any])


def style() -> Any:
    """A context in which figures are drawn and saved in the shared style."""
    return mpl.rc_context(RC)


def styled(func: F) -> F:
    """Decorate a drawing function so its figure is created in the shared style."""
    return mpl.rc_context(RC)(func)


def family(name: str) -> str | None:
    """The stop rule's family of a policy or detector name (`EvalStop-2+SRTF-Est` ->
    `EvalStop`, `model:ppo.zip+FIFO` -> `model`); None for a base scheduler alone."""
    detector = str(name).split("+", 1)[0]
    if detector in BASES:
        return None
    return re.split(r"[-:]", detector, maxsplit=1)[0]


def policy_styles(names: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Line kwargs (color, marker, linestyle) per name, one colour per rule family (FAMILIES
    in a fixed order; families not listed take the next slots in order of appearance)."""
    names = list(dict.fromkeys(map(str, names)))
    fams = [family(n) for n in names]
    unknown = [f for f in dict.fromkeys(fams) if f is not None and f not in FAMILIES]
    slots = {f: i for i, f in enumerate((*FAMILIES, *unknown))}
    seen: dict[str | None, int] = {}
    out: dict[str, dict[str, Any]] = {}
    for name, fam in zip(names, fams, strict=True):
        variant = seen[fam] = seen.get(fam, -1) + 1
        if fam is None:
            out[name] = {"color": NEUTRAL, "marker": "o",
                         "linestyle": LINESTYLES[(1 + variant) % len(LINESTYLES)]}
            continue
        i = slots[fam]
        colour = OKABE_ITO[i % len(OKABE_ITO)]
        out[name] = {"color": colour, "marker": MARKERS[i % len(MARKERS)],
                     "linestyle": LINESTYLES[(i // len(OKABE_ITO) + variant) % len(LINESTYLES)],
                     **({"markeredgecolor": "black", "markeredgewidth": 0.5}
                        if colour in PALE else {})}
    return out


def pdf_font_subtypes(path: Path) -> set[str]:
    """The font subtypes a PDF embeds (`TrueType`, `Type3`, ...), read from its objects and its
    Flate-compressed streams (object streams can hold font dictionaries): no pdffonts needed."""
    data = Path(path).read_bytes()
    chunks = [data]
    for match in re.finditer(rb"stream\r?\n", data):
        try:
            chunks.append(zlib.decompressobj().decompress(data[match.end():]))
        except zlib.error:
            continue   # not Flate (an image, or plain text already in `data`)
    found = {m.decode() for c in chunks for m in re.findall(rb"/Subtype\s*/(\w+)", c)}
    return found & FONT_SUBTYPES
