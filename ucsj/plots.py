"""PNG plots of the analyses (matplotlib, headless).

Each PNG carries its caption in a `Description` text chunk, which `report --html` shows under
the figure, so a caption always says what its plot draws.
"""

from __future__ import annotations

import textwrap
from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt
import numpy as np

from ucsj.analysis import EfficiencyPoint, Importance
from ucsj.io import atomic_writer
from ucsj.shift import ShiftReport

CHANCE = "dotted line: chance (0.5)"


def _save(fig: plt.Figure, path: Path, caption: str) -> None:
    fig.tight_layout()
    with atomic_writer(path, "wb") as out:
        metadata = {"Software": None, "Description": caption}
        fig.savefig(out, format="png", dpi=120, metadata=metadata)
    plt.close(fig)


def shorten(text: str, width: int) -> str:
    return textwrap.shorten(" ".join(text.split()), width=width, placeholder="…")


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
    _save(
        fig,
        path,
        "Sample efficiency: balanced accuracy of each language (mean, band ± std over seeds) "
        "against the share of the English training split the module was trained on; dashed: "
        f"the held-out English split; {CHANCE}.",
    )


def plot_importance(
    imp: Importance, scatter: Path, heatmap: Path, labels: dict[str, str] | None = None
) -> None:
    """Figure 3 (Spearman vs BA change with English top criteria) and Figure 4 (heatmap).

    `labels` maps criterion ids to their question text, shown (shortened) on the heatmap."""
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for lang in imp.profiles:
        delta = imp.ba_top[lang] - imp.ba_all[lang]
        ax.scatter(imp.spearman[lang], delta)
        ax.annotate(lang, (imp.spearman[lang], delta), textcoords="offset points", xytext=(4, 4))
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.margins(x=0.15, y=0.15)  # room for the language labels at the edges
    ax.set_xlabel("Spearman correlation with the English importance profile")
    ax.set_ylabel("BA change with the English top criteria only")
    ax.set_title("Criteria importance alignment")
    _save(
        fig,
        scatter,
        "Criteria importance alignment: per language, the Spearman correlation of its "
        "random-forest importances with English's (x) against the change in cross-validated "
        f"balanced accuracy when only English's top {len(imp.top)} criteria are used (y).",
    )

    langs = list(imp.profiles)
    labels = labels or {}
    names = [
        f"{c}: {shorten(labels[c], 70)}" if c in labels else c for c in imp.criteria
    ]  # one row per criterion, so the question text reads horizontally
    matrix = np.asarray([imp.profiles[lang] for lang in langs]).T
    fig, ax = plt.subplots(figsize=(10, 1.6 + 0.28 * len(names)))
    image = ax.imshow(matrix, aspect="auto", cmap="viridis")
    ax.set_xticks(range(len(langs)), langs)
    ax.xaxis.tick_top()
    ax.set_yticks(range(len(names)), names, fontsize=8)
    ax.set_title("Gini importance of each criterion per language")
    bar = fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02)
    bar.set_label("Gini importance")
    _save(
        fig,
        heatmap,
        "Criteria importance heatmap: the random forest's Gini importance of each criterion "
        "question (rows) when trained on each language's labels (columns); each column sums "
        "to 1, brighter: more of that language's signal.",
    )


def plot_bars(values: dict[str, float], path: Path, title: str, ylabel: str, caption: str) -> None:
    fig, ax = plt.subplots(figsize=(max(5, 0.8 * len(values)), 4))
    names = list(values)
    ax.bar(names, [values[n] for n in names], color="#4c72b0")
    for i, n in enumerate(names):
        ax.annotate(f"{values[n]:.3f}", (i, values[n]), ha="center", va="bottom", fontsize=8)
    ax.axhline(0.5, color="grey", linewidth=0.8, linestyle=":")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.set_ylim(0, 1.05)
    _save(fig, path, f"{caption}; {CHANCE}.")


# What the decomposition plot puts on its x axes: (key, axis label).
COSTS = (
    ("calls_per_sample", "LLM calls per sample"),
    ("tokens_per_sample", "tokens per sample (prompt + completion)"),
    ("llm_seconds_per_sample", "server seconds per sample"),
)


def plot_decomposition(results: dict[str, dict[str, Any]], path: Path) -> None:
    """Table 4 drawn: each variant's cost per sample against its balanced accuracy."""
    costs = {
        name: {
            **c,
            "tokens_per_sample": c["prompt_tokens_per_sample"] + c["completion_tokens_per_sample"],
        }
        for name, c in results.items()
    }
    panels = [
        (key, label) for key, label in COSTS if any(c.get(key) is not None for c in costs.values())
    ]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4), squeeze=False)
    for ax, (key, label) in zip(axes[0], panels, strict=True):
        for name, c in costs.items():
            if c.get(key) is None:
                continue
            ax.scatter(c[key], c["ba_avg"], s=40)
            ax.annotate(name, (c[key], c["ba_avg"]), textcoords="offset points", xytext=(5, 4),
                        fontsize=8)  # fmt: skip
        ax.set_xlabel(label)
        ax.set_ylabel("balanced accuracy (avg over targets)")
        ax.axhline(0.5, color="grey", linewidth=0.8, linestyle=":")
        ax.set_ylim(0, 1.05)
        top = max(c[key] for c in costs.values() if c.get(key) is not None)
        ax.set_xlim(0, 1.3 * top if top > 0 else 1)  # from zero, so costs compare as ratios
    fig.suptitle("Decomposition variants: cost per sample vs balanced accuracy")
    missing = "" if len(panels) == len(COSTS) else " (no server seconds: the cache held none)"
    _save(
        fig,
        path,
        "Decomposition: for each variant, the cost per sample (LLM calls, tokens, the server's "
        f"seconds) against balanced accuracy averaged over the target languages{missing}; "
        f"{CHANCE}.",
    )


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
    bar = fig.colorbar(image, ax=ax, fraction=0.03)
    bar.set_label("W1 shift")
    _save(
        fig,
        path,
        f"Answer shift: for each language (rows, its mean shift in brackets) the W1 distance of "
        f"each criterion's P(yes) (columns) from the {report.reference} reference; 0: answered "
        "as in the reference.",
    )
