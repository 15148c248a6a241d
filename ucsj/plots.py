"""PNG plots of the analyses (matplotlib, headless)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt
import numpy as np

from ucsj.analysis import EfficiencyPoint, Importance
from ucsj.io import atomic_writer
from ucsj.shift import ShiftReport


def _save(fig: plt.Figure, path: Path) -> None:
    fig.tight_layout()
    with atomic_writer(path, "wb") as out:
        fig.savefig(out, format="png", dpi=120, metadata={"Software": None})
    plt.close(fig)


def plot_efficiency(points: list[EfficiencyPoint], path: Path) -> None:
    """Figure 2: balanced accuracy against the share of English training data."""
    series: dict[str, list[EfficiencyPoint]] = defaultdict(list)
    for p in points:
        series[p.lang].append(p)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for lang, pts in series.items():
        x = [100 * p.fraction for p in pts]
        mean = np.asarray([p.mean for p in pts])
        std = np.asarray([p.std for p in pts])
        style = "--" if "test" in lang else "-"
        ax.plot(x, mean, style, marker="o", label=lang)
        ax.fill_between(x, mean - std, mean + std, alpha=0.15)
    ax.set_xlabel("English training data used (% of the 70% split)")
    ax.set_ylabel("balanced accuracy")
    ax.set_title("Sample efficiency (mean ± std over seeds)")
    ax.axhline(0.5, color="grey", linewidth=0.8, linestyle=":")
    ax.legend(fontsize=8)
    _save(fig, path)


def plot_importance(imp: Importance, scatter: Path, heatmap: Path) -> None:
    """Figure 3 (Spearman vs BA change with English top criteria) and Figure 4 (heatmap)."""
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for lang in imp.profiles:
        delta = imp.ba_top[lang] - imp.ba_all[lang]
        ax.scatter(imp.spearman[lang], delta)
        ax.annotate(lang, (imp.spearman[lang], delta), textcoords="offset points", xytext=(4, 4))
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.set_xlabel("Spearman correlation with the English importance profile")
    ax.set_ylabel("BA change with the English top criteria only")
    ax.set_title("Criteria importance alignment")
    _save(fig, scatter)

    langs = list(imp.profiles)
    matrix = np.asarray([imp.profiles[lang] for lang in langs])
    fig, ax = plt.subplots(figsize=(max(6, 0.35 * len(imp.criteria)), 1 + 0.5 * len(langs)))
    image = ax.imshow(matrix, aspect="auto", cmap="viridis")
    ax.set_yticks(range(len(langs)), langs)
    ax.set_xticks(range(len(imp.criteria)), imp.criteria, rotation=90, fontsize=7)
    ax.set_title("Gini importance of each criterion per language")
    fig.colorbar(image, ax=ax, fraction=0.03)
    _save(fig, heatmap)


def plot_bars(values: dict[str, float], path: Path, title: str, ylabel: str) -> None:
    fig, ax = plt.subplots(figsize=(max(5, 0.8 * len(values)), 4))
    names = list(values)
    ax.bar(names, [values[n] for n in names], color="#4c72b0")
    for i, n in enumerate(names):
        ax.annotate(f"{values[n]:.3f}", (i, values[n]), ha="center", va="bottom", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.set_ylim(0, 1.05)
    _save(fig, path)


def plot_shift(report: ShiftReport, path: Path) -> None:
    """Languages x criteria: how far each criterion's answers moved from the reference (W1)."""
    langs = list(report.languages)
    criteria = report.criteria
    matrix = np.asarray(
        [
            [{c.id: c.shift for c in report.languages[lang].criteria}[q] for q in criteria]
            for lang in langs
        ]
    )
    fig, ax = plt.subplots(figsize=(max(6, 0.35 * len(criteria)), 1.2 + 0.5 * len(langs)))
    image = ax.imshow(matrix, aspect="auto", cmap="magma_r", vmin=0, vmax=max(0.3, matrix.max()))
    ax.set_yticks(
        range(len(langs)), [f"{lang} ({report.languages[lang].shift:.3f})" for lang in langs]
    )
    ax.set_xticks(range(len(criteria)), criteria, rotation=90, fontsize=7)
    ax.set_title(f"Shift of each criterion's answers from the {report.reference} reference (W1)")
    fig.colorbar(image, ax=ax, fraction=0.03)
    _save(fig, path)
