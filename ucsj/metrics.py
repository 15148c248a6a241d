"""Pure metric computation: balanced accuracy, rates and bootstrap intervals."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

BOOTSTRAP_SAMPLES = 1000
BOOTSTRAP_SEED = 42


def balanced_accuracy(
    y_true: Sequence[int] | np.ndarray, y_pred: Sequence[int] | np.ndarray
) -> float:
    """Mean recall over the classes present in y_true (sklearn's definition)."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    recalls = [float(np.mean(y_pred[y_true == c] == c)) for c in (0, 1) if np.any(y_true == c)]
    return float(np.mean(recalls)) if recalls else float("nan")


def bootstrap_interval(
    y_true: np.ndarray,
    y_pred: np.ndarray,
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """95% percentile interval of balanced accuracy over resampled samples."""
    rng = np.random.default_rng(seed)
    n = len(y_true)
    if n == 0:
        return float("nan"), float("nan")
    stats = []
    for _ in range(samples):
        idx = rng.integers(0, n, n)
        stats.append(balanced_accuracy(y_true[idx], y_pred[idx]))
    low, high = np.nanpercentile(stats, [2.5, 97.5])
    return float(low), float(high)


@dataclass(frozen=True)
class LanguageMetrics:
    lang: str
    n: int
    ba: float
    ba_low: float
    ba_high: float
    acc: float
    tpr: float
    tnr: float
    pass_rate: float  # share predicted pass
    unreadable: float  # mean share of unreadable answers
    error_rate: float  # share of samples with no verdict (failed or unparseable)

    def value(self, metric: str) -> float:
        return float(getattr(self, metric))


def language_metrics(
    lang: str, labels: Sequence[int], preds: Sequence[int | None], unreadable: Sequence[float] = ()
) -> LanguageMetrics:
    """Metrics for one language; a missing verdict counts as wrong (MEMERAG's rule)."""
    y = np.asarray(labels, dtype=int)
    missing = np.asarray([p is None for p in preds], dtype=bool)
    # no verdict -> the opposite of the gold label
    p = np.asarray([1 - t if v is None else v for t, v in zip(y, preds, strict=True)], dtype=int)
    low, high = bootstrap_interval(y, p)

    def rate(mask: np.ndarray) -> float:
        return float(np.mean(p[mask] == y[mask])) if mask.any() else float("nan")

    return LanguageMetrics(
        lang=lang,
        n=len(y),
        ba=balanced_accuracy(y, p),
        ba_low=low,
        ba_high=high,
        acc=float(np.mean(p == y)) if len(y) else float("nan"),
        tpr=rate(y == 1),
        tnr=rate(y == 0),
        pass_rate=float(np.mean([v == 1 for v in preds])) if len(preds) else float("nan"),
        unreadable=float(np.mean(unreadable)) if len(unreadable) else 0.0,
        error_rate=float(np.mean(missing)) if len(missing) else 0.0,
    )


# -- pointwise and pairwise settings (CE-Judge's LitEval and MM-Eval) ----------------------------


def kendall_tau(gold: Sequence[float], predicted: Sequence[float]) -> float:
    """Kendall's tau-b between gold and predicted scores (scipy), NaN when undefined."""
    from scipy.stats import kendalltau

    if len(gold) < 2:
        return float("nan")
    return float(kendalltau(gold, predicted).statistic)


def kendall_interval(
    gold: Sequence[float],
    predicted: Sequence[float],
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """95% percentile bootstrap interval of Kendall's tau."""
    g, p = np.asarray(gold, dtype=float), np.asarray(predicted, dtype=float)
    rng = np.random.default_rng(seed)
    stats = [
        kendall_tau(g[idx], p[idx])
        for idx in (rng.integers(0, len(g), len(g)) for _ in range(samples))
    ]
    low, high = np.nanpercentile(stats, [2.5, 97.5]) if len(g) > 1 else (np.nan, np.nan)
    return float(low), float(high)


@dataclass(frozen=True)
class PairwiseMetrics:
    n: int
    accuracy: float  # over both orders: a pair counts half for each order judged right
    consistent: float  # share of pairs judged the same way in both orders
    position_bias: float  # share of verdicts that pick the first position


def pairwise_metrics(
    preferences: Sequence[str], forward: Sequence[str | None], backward: Sequence[str | None]
) -> PairwiseMetrics:
    """`forward` judged (a, b) as given; `backward` the same pair swapped, its verdict
    already mapped back to the original labels. A missing verdict counts as wrong."""
    n = len(preferences)
    if n == 0:
        return PairwiseMetrics(0, float("nan"), float("nan"), float("nan"))
    right = sum((f == g) + (b == g) for g, f, b in zip(preferences, forward, backward, strict=True))
    consistent = sum(f is not None and f == b for f, b in zip(forward, backward, strict=True))
    # in the swapped order, original "b" sits first
    first = sum(f == "a" for f in forward) + sum(b == "b" for b in backward)
    verdicts = sum(f is not None for f in forward) + sum(b is not None for b in backward)
    return PairwiseMetrics(
        n, right / (2 * n), consistent / n, first / verdicts if verdicts else float("nan")
    )
