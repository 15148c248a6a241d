"""Pure metric computation: balanced accuracy, rates and bootstrap intervals."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

BOOTSTRAP_SAMPLES = 1000
BOOTSTRAP_SEED = 42
ALL = "all"  # the group pooled over languages
AVG = "avg"  # the unweighted mean over languages (the papers' "average BA")
NAN = float("nan")


def balanced_accuracy(
    y_true: Sequence[int] | np.ndarray, y_pred: Sequence[int] | np.ndarray
) -> float:
    """Mean recall over both classes; NaN when y_true lacks one of them (scikit-learn would
    return the one class's recall, which reads as a good score for a judge that says "pass"
    to everything)."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    if not (np.any(y_true == 0) and np.any(y_true == 1)):
        return NAN
    return float(np.mean([np.mean(y_pred[y_true == c] == c) for c in (0, 1)]))


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
    undefined: dict[str, str] = field(default_factory=dict)  # metric -> why it has no value

    def value(self, metric: str) -> float:
        return float(getattr(self, metric))


def binary_verdicts(labels: Sequence[int], preds: Sequence[int | None]) -> np.ndarray:
    """The verdicts with a missing one counted as wrong (MEMERAG's rule): the opposite of gold."""
    return np.asarray(
        [1 - t if v is None else v for t, v in zip(labels, preds, strict=True)], dtype=int
    )


def _binary_undefined(y: np.ndarray) -> dict[str, str]:
    if not len(y):
        return {m: "no samples" for m in ("ba", "acc", "tpr", "tnr", "pass_rate")}
    missing = [c for c in (1, 0) if not np.any(y == c)]
    if not missing:
        return {}
    only = 1 - missing[0]
    reason = f"gold labels are of one class only (all {only})"
    out = {"ba": f"{reason}: balanced accuracy needs both"}
    out["tpr" if only == 0 else "tnr"] = f"{reason}: no gold {1 - only} to measure"
    return out


def language_metrics(
    lang: str, labels: Sequence[int], preds: Sequence[int | None], unreadable: Sequence[float] = ()
) -> LanguageMetrics:
    """Metrics for one language; a missing verdict counts as wrong (MEMERAG's rule)."""
    y = np.asarray(labels, dtype=int)
    missing = np.asarray([p is None for p in preds], dtype=bool)
    p = binary_verdicts(y, preds)
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
        undefined=_binary_undefined(y),
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
    tau: float  # Kendall's tau-b, a sample without a score counted as wrong
    tau_low: float
    tau_high: float
    error_rate: float  # share of samples with no score
    tau_scored: float  # Kendall's tau-b over the samples with a score only
    undefined: dict[str, str] = field(default_factory=dict)

    def value(self, metric: str) -> float:
        return float(getattr(self, metric))


def scores_with_missing_as_wrong(
    gold: Sequence[float], predicted: Sequence[float | None]
) -> np.ndarray:
    """Predicted scores with each missing one counted as wrong, as a missing binary verdict is:
    a sample whose gold score is in the upper half of the gold range (midpoint included) gets a
    score below every other, one in the lower half a score above every other."""
    known = [float(v) for v in (*gold, *(p for p in predicted if p is not None))]
    if not known:
        return np.asarray([], dtype=float)
    middle = (min(gold) + max(gold)) / 2 if len(gold) else 0.0
    low, high = min(known) - 1, max(known) + 1
    return np.asarray(
        [
            (low if g >= middle else high) if p is None else p
            for g, p in zip(gold, predicted, strict=True)
        ],
        dtype=float,
    )


def _tau_undefined(gold: Sequence[float], predicted: Sequence[float]) -> str | None:
    if len(gold) < 2:
        return f"{len(gold)} sample(s): Kendall's tau needs at least 2"
    if len(set(gold)) < 2:
        return "every gold score is the same: Kendall's tau needs two values"
    if len(set(predicted)) < 2:
        return "every predicted score is the same: Kendall's tau is undefined"
    return None


def pointwise_metrics(
    group: str, gold: Sequence[int], predicted: Sequence[float | None]
) -> PointwiseMetrics:
    """Kendall's tau with missing scores counted as wrong, and over the scored samples only."""
    imputed = scores_with_missing_as_wrong(gold, predicted)
    low, high = kendall_interval(gold, imputed)
    scored = [(g, p) for g, p in zip(gold, predicted, strict=True) if p is not None]
    g_scored, p_scored = [s[0] for s in scored], [s[1] for s in scored]
    undefined = {}
    if reason := _tau_undefined(gold, list(imputed)):
        undefined["tau"] = reason
    if reason := _tau_undefined(g_scored, p_scored):
        undefined["tau_scored"] = reason
    n = len(gold)
    return PointwiseMetrics(
        group,
        n,
        NAN if "tau" in undefined else kendall_tau(gold, imputed),
        low,
        high,
        (n - len(scored)) / n if n else NAN,
        NAN if "tau_scored" in undefined else kendall_tau(g_scored, p_scored),
        undefined,
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
    undefined: dict[str, str] = field(default_factory=dict)

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
        reasons = {m: "no samples" for m in ("acc", "consistency", "position_bias")}
        return PairwiseMetrics(group, 0, nan, nan, nan, nan, nan, nan, reasons)
    right = pairs_right(preferences, forward, backward)
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
        {} if verdicts else {"position_bias": "no verdicts: no position was picked"},
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


def pairs_right(
    preferences: Sequence[str], forward: Sequence[str | None], backward: Sequence[str | None]
) -> np.ndarray:
    """Per pair, the share of its two orders judged right (a missing verdict is wrong)."""
    return np.asarray(
        [((f == g) + (b == g)) / 2 for g, f, b in zip(preferences, forward, backward, strict=True)]
    )


# -- the average over languages ------------------------------------------------------------------


@dataclass(frozen=True)
class AverageMetrics:
    """The unweighted mean over languages of each per-language metric (the papers' "average
    BA"); undefined when the metric is undefined in one of the languages or one is missing."""

    group: str
    n: int  # the samples of the languages averaged
    languages: list[str]
    values: dict[str, float]  # metric -> mean over languages (NaN when undefined)
    low: float  # 95% stratified bootstrap interval of the headline's mean
    high: float
    headline: str
    undefined: dict[str, str] = field(default_factory=dict)

    def value(self, metric: str) -> float:
        if metric == "n":
            return float(self.n)
        if metric == f"{self.headline}_low":
            return self.low
        if metric == f"{self.headline}_high":
            return self.high
        return float(self.values.get(metric, NAN))


def average_metrics(
    per_language: dict[str, LanguageMetrics | PointwiseMetrics | PairwiseMetrics],
    expected: Sequence[str],
    metrics: Sequence[str],
    headline: str,
    interval: tuple[float, float],
) -> AverageMetrics:
    """The mean of each metric over the `expected` languages, given each one's metrics."""
    absent = [lang for lang in expected if lang not in per_language]
    values, undefined = {}, {}
    for metric in metrics:
        if metric == "n":
            continue
        if absent:
            undefined[metric] = f"no predictions for {', '.join(absent)}"
            values[metric] = NAN
            continue
        per = {lang: per_language[lang].value(metric) for lang in expected}
        bad = [lang for lang, v in per.items() if math.isnan(v)]
        if bad:
            why = per_language[bad[0]].undefined.get(metric, "undefined")
            undefined[metric] = f"undefined in {', '.join(bad)} ({why})"
            values[metric] = NAN
        else:
            values[metric] = float(np.mean(list(per.values())))
    low, high = (NAN, NAN) if headline in undefined else interval
    return AverageMetrics(
        AVG,
        sum(per_language[lang].n for lang in expected if lang in per_language),
        sorted(expected),
        values,
        low,
        high,
        headline,
        undefined,
    )


def average_interval(
    statistics: Sequence[tuple[int, Callable[[np.ndarray], float]]],
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """95% interval of the mean over languages of a statistic: each resample draws every
    language's samples anew from that language alone (a stratified bootstrap)."""
    if not statistics or any(n == 0 for n, _ in statistics):
        return NAN, NAN
    rng = np.random.default_rng(seed)
    means = [
        float(np.mean([stat(rng.integers(0, n, n)) for n, stat in statistics]))
        for _ in range(samples)
    ]
    if all(math.isnan(v) for v in means):
        return NAN, NAN
    low, high = np.nanpercentile(means, [2.5, 97.5])
    return float(low), float(high)
