"""The shared figure style: TrueType fonts in PDF, a rule's colour kept across figures, and no
change to matplotlib's global state."""

from __future__ import annotations

import matplotlib as mpl
import matplotlib.pyplot as plt

from evalstop_gym.benchmarks.analysis import figures
from evalstop_gym.benchmarks.analysis.figure_style import (
    NEUTRAL,
    OKABE_ITO,
    pdf_font_subtypes,
    policy_styles,
    style,
)


def text_figure():
    fig, ax = plt.subplots(figsize=(3.5, 2.0))
    ax.plot([0, 1], [0, 1], label="a line")
    ax.set(title="some text ± 95%", xlabel="x", ylabel="y")
    ax.legend()
    return fig


def test_the_pdf_check_sees_type3_fonts_when_matplotlib_embeds_them(tmp_path):
    """The check must be able to fail: matplotlib's default (pdf.fonttype 3) is caught."""
    fig = text_figure()
    with mpl.rc_context({"pdf.fonttype": 3}):
        fig.savefig(tmp_path / "t3.pdf")
    plt.close(fig)
    assert "Type3" in pdf_font_subtypes(tmp_path / "t3.pdf")


def test_save_embeds_truetype_whatever_the_callers_settings(tmp_path):
    with mpl.rc_context({"pdf.fonttype": 3}):
        figures.save(text_figure(), tmp_path, "plot")
    fonts = pdf_font_subtypes(tmp_path / "plot.pdf")
    assert fonts and "Type3" not in fonts
    assert fonts <= {"TrueType", "Type0", "CIDFontType2"}


def test_the_style_leaves_global_settings_alone(small_config):
    before = dict(mpl.rcParams)
    plt.close(figures.draw_fig2(small_config, 42))
    with style():
        assert mpl.rcParams["pdf.fonttype"] == 42
    assert dict(mpl.rcParams) == before


def test_a_rule_keeps_its_colour_across_figures():
    one = policy_styles(["SRTF-Est", "EvalStop-2+SRTF-Est"])
    other = policy_styles(["LossPlateau", "StopAt-0.65", "Patience-3", "EvalStop-2"])
    assert one["EvalStop-2+SRTF-Est"] == other["EvalStop-2"]
    assert one["SRTF-Est"]["color"] == NEUTRAL   # a base scheduler alone: context, in grey


def test_rules_in_one_figure_are_told_apart():
    names = ["EvalStop-2", "StopAt-0.65", "LossPlateau", "Patience-3", "CUSUM-0-3",
             "BOCPD-0.5", "MedianPruner", "DeclineTest-0.05", "Mine-3+FIFO"]
    styles = policy_styles(names)
    looks = {(s["color"], s["marker"], s["linestyle"]) for s in styles.values()}
    assert len(looks) == len(names)
    assert len({s["color"] for s in styles.values()}) == len(OKABE_ITO)
    assert {s["color"] for s in styles.values()} <= set(OKABE_ITO)


def test_variants_of_one_rule_share_its_colour_not_its_line():
    styles = policy_styles(["DeclineTest-0.01", "DeclineTest-0.05", "DeclineTest-0.2"])
    assert len({s["color"] for s in styles.values()}) == 1
    assert len({s["linestyle"] for s in styles.values()}) == 3
