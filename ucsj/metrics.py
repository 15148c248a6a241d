"""Pure metric computation: balanced accuracy, rates and bootstrap intervals."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

BOOTSTRAP_SAMPLES = 1000
BOOTSTRAP_SEED = 42
ALL = "all"  # the group pooled over languages


def balanced_accuracy(
    y_true: Sequence[int] | np.ndarray, y_pred: Sequence[int] | np.ndarray
) -> float:
    """Mean recall over the classes present in y_true (sklearn's definition)."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    recalls = [float(np.mean(y_pred[y_true == c] == c)) for c in (0, 1) if np.any(y_true == c)]
    return float(np.mean(recalls)) if recalls else float("nan")


def bootstrap(
    n: int,
    statistic: Callable[[np.ndarray], float],
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """95% percentile interval of `statistic(indices)` over `samples` resamples of n items."""
    if n == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    stats = [statistic(rng.integers(0, n, n)) for _ in range(samples)]
    if all(math.isnan(v) for v in stats):
        return float("nan"), float("nan")
    low, high = np.nanpercentile(stats, [2.5, 97.5])
    return float(low), float(high)


def bootstrap_interval(y_true: np.ndarray, y_pred: np.ndarray) -> tuple[float, float]:
    """95% percentile interval of balanced accuracy over resampled samples."""
    return bootstrap(len(y_true), lambda idx: balanced_accuracy(y_true[idx], y_pred[idx]))


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


def kendall_interval(gold: Sequence[float], predicted: Sequence[float]) -> tuple[float, float]:
    """95% percentile bootstrap interval of Kendall's tau."""
    g, p = np.asarray(gold, dtype=float), np.asarray(predicted, dtype=float)
    if len(g) < 2:
        return float("nan"), float("nan")
    return bootstrap(len(g), lambda idx: kendall_tau(g[idx], p[idx]))


@dataclass(frozen=True)
class PointwiseMetrics:
    group: str  # a language pair, a language or "all"
    n: int
    tau: float  # Kendall's tau-b between gold and predicted scores
    tau_low: float
    tau_high: float
    error_rate: float  # share of samples with no score; they are left out of tau

    def value(self, metric: str) -> float:
        return float(getattr(self, metric))


def pointwise_metrics(
    group: str, gold: Sequence[int], predicted: Sequence[float | None]
) -> PointwiseMetrics:
    """Kendall's tau over the samples that have a predicted score."""
    scored = [(g, p) for g, p in zip(gold, predicted, strict=True) if p is not None]
    g = [pair[0] for pair in scored]
    p = [pair[1] for pair in scored]
    low, high = kendall_interval(g, p)
    n = len(gold)
    return PointwiseMetrics(
        group, n, kendall_tau(g, p), low, high, (n - len(scored)) / n if n else float("nan")
    )


@dataclass(frozen=True)
class PairwiseMetrics:
    group: str  # a language, a subset, "lang/subset" or "all"
    n: int
    acc: float  # over both orders: a pair counts half for each order judged right
    acc_low: float
    acc_high: float
    consistency: float  # share of pairs judged the same way in both orders
    position_bias: float  # share of verdicts that pick the first position (0.5: none)
    error_rate: float  # share of verdicts missing (counted as wrong)

    def value(self, metric: str) -> float:
        return float(getattr(self, metric))


def pairwise_metrics(
    preferences: Sequence[str],
    forward: Sequence[str | None],
    backward: Sequence[str | None],
    group: str = ALL,
) -> PairwiseMetrics:
    """`forward` judged (a, b) as given; `backward` the same pair swapped, its verdict
    already mapped back to the original labels. A missing verdict counts as wrong."""
    n = len(preferences)
    nan = float("nan")
    if n == 0:
        return PairwiseMetrics(group, 0, nan, nan, nan, nan, nan, nan)
    right = np.asarray(
        [((f == g) + (b == g)) / 2 for g, f, b in zip(preferences, forward, backward, strict=True)]
    )
    low, high = bootstrap(n, lambda idx: float(np.mean(right[idx])))
    consistent = sum(f is not None and f == b for f, b in zip(forward, backward, strict=True))
    # in the swapped order, original "b" sits first
    first = sum(f == "a" for f in forward) + sum(b == "b" for b in backward)
    verdicts = sum(f is not None for f in forward) + sum(b is not None for b in backward)
    return PairwiseMetrics(
        group,
        n,
        float(np.mean(right)),
        low,
        high,
        consistent / n,
        first / verdicts if verdicts else nan,
        1 - verdicts / (2 * n),
    )


def chosen_first_accuracy(
    preferences: Sequence[str], forward: Sequence[str | None], swapped: Sequence[str | None]
) -> float:
    """Pairwise accuracy of the order that shows the better response first (the CE-Judge
    paper's protocol): `forward` when it is "a", `swapped` (mapped back) when it is "b". A
    missing verdict counts as wrong."""
    if not preferences:
        return float("nan")
    right = [
        (f if p == "a" else s) == p for p, f, s in zip(preferences, forward, swapped, strict=True)
    ]
    return float(np.mean(right))
