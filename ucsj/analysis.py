"""The UCS paper's section 5 analyses on the user's own scores. Pure computation: records in,
tables (plain dicts and lists) out; `ucsj.plots` draws them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from scipy.stats import spearmanr
from sklearn.model_selection import StratifiedKFold, train_test_split

from ucsj.criteria import CriteriaSet
from ucsj.errors import InputError
from ucsj.llm.cache import ResponseCache
from ucsj.metrics import balanced_accuracy
from ucsj.scores import ScoreRecord
from ucsj.transfer import (
    MODULES,
    RANDOM_STATE,
    feature_matrix,
    feature_names,
    fit_module,
    verdicts,
)

FRACTIONS = (0.05, 0.10, 0.20, 0.30, 0.50, 0.75, 1.00)  # paper 5.2
TEST_SHARE = 0.30
TOP_K = 10  # paper 5.3


def by_language(records: list[ScoreRecord]) -> dict[str, list[ScoreRecord]]:
    groups: dict[str, list[ScoreRecord]] = defaultdict(list)
    for r in records:
        if r.label is not None and r.error is None:
            groups[r.lang].append(r)
    return dict(sorted(groups.items()))


def _xy(records: list[ScoreRecord], names: list[str], kind: str) -> tuple[np.ndarray, np.ndarray]:
    return feature_matrix(records, names, kind), np.asarray([r.label for r in records])


def _both_classes(y: np.ndarray, minimum: int = 2) -> bool:
    return len(y) > 0 and np.bincount(y, minlength=2).min() >= minimum


# -- 5.2 sample efficiency ------------------------------------------------------------------------


@dataclass(frozen=True)
class EfficiencyPoint:
    fraction: float
    lang: str  # "en (test)" for the English hold-out
    mean: float
    std: float
    runs: int


def sample_efficiency(
    train: list[ScoreRecord],
    targets: list[ScoreRecord],
    criteria: CriteriaSet,
    *,
    module: str = "mlp",
    features: str = "concept",
    seeds: int = 5,
    train_lang: str = "en",
) -> list[EfficiencyPoint]:
    """A fixed seeded 70/30 split of the English data; the module trained on growing shares
    of the 70%, scored on the English 30% and every target language; repeated over seeds (each
    repeat draws its share anew and seeds the module anew: random_state 42, 43, ...)."""
    names = feature_names(criteria, features)
    english = [r for r in train if r.label is not None and r.error is None]
    x, y = _xy(english, names, features)
    if not _both_classes(y, 4):
        raise InputError("sample-efficiency needs at least 4 labelled English samples per class")
    x_pool, x_test, y_pool, y_test = train_test_split(
        x, y, test_size=TEST_SHARE, stratify=y, random_state=RANDOM_STATE
    )
    evaluations = {f"{train_lang} (test)": (x_test, y_test)}
    for lang, recs in by_language(targets).items():
        evaluations[lang] = _xy(recs, names, features)
    points = []
    for fraction in FRACTIONS:
        scores: dict[str, list[float]] = defaultdict(list)
        for seed in range(seeds if fraction < 1.0 else 1):  # all the data: no draw to vary
            x_fit, y_fit = _subsample(x_pool, y_pool, fraction, seed)
            if not _both_classes(y_fit, 1):
                continue
            model = fit_module(MODULES[module](RANDOM_STATE + seed), x_fit, y_fit)
            for lang, (xe, ye) in evaluations.items():
                scores[lang].append(balanced_accuracy(ye, verdicts([model], xe)))
        for lang, values in scores.items():
            points.append(
                EfficiencyPoint(
                    fraction, lang, float(np.mean(values)), float(np.std(values)), len(values)
                )
            )
    return points


def _subsample(
    x: np.ndarray, y: np.ndarray, fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    if fraction >= 1.0:
        return x, y
    n = max(2, round(fraction * len(y)))
    try:
        x_sub, _, y_sub, _ = train_test_split(
            x, y, train_size=n, stratify=y, random_state=RANDOM_STATE + seed
        )
    except ValueError:  # too few for a stratified draw: a plain seeded one
        rng = np.random.default_rng(RANDOM_STATE + seed)
        idx = rng.choice(len(y), size=n, replace=False)
        x_sub, y_sub = x[idx], y[idx]
    return x_sub, y_sub


# -- 5.3 criteria importance ----------------------------------------------------------------------


@dataclass(frozen=True)
class Importance:
    criteria: list[str]
    profiles: dict[str, list[float]]  # lang -> Gini importance per criterion
    spearman: dict[str, float]  # lang -> correlation with the English profile
    ba_all: dict[str, float]  # lang -> cross-validated BA with every criterion
    ba_top: dict[str, float]  # lang -> ... with the TOP_K most important in English
    top: list[str]


def criteria_importance(
    records: list[ScoreRecord], criteria: CriteriaSet, *, reference: str = "en", folds: int = 5
) -> Importance:
    """Per language: a random forest on criterion answers with that language's labels, Gini
    importances, Spearman against the reference language, and the BA change when only the
    reference's top criteria are kept (cross-validated within the language). For the
    reference itself the top criteria are chosen inside each fold, on that fold's training
    part only: chosen on all of it, they would be scored on the data that chose them."""
    names = feature_names(criteria, "criterion")
    groups = by_language(records)
    if reference not in groups:
        raise InputError(
            f"importance needs labelled scores in the reference language '{reference}'"
        )
    profiles: dict[str, list[float]] = {}
    data = {}
    for lang, recs in groups.items():
        x, y = _xy(recs, names, "criterion")
        counts = np.bincount(y, minlength=2)
        if counts.min() < 2:
            raise InputError(
                f"importance needs at least 2 labelled samples of each class in every language: "
                f"'{lang}' has {counts[0]} with label 0 and {counts[1]} with label 1 (leave its "
                "scores out, or label more)"
            )
        data[lang] = (x, y)
        profiles[lang] = top_importances(x, y)
    ref = np.asarray(profiles[reference])
    top_idx = _top(ref)
    spearman, ba_all, ba_top = {}, {}, {}
    for lang, profile in profiles.items():
        rho = spearmanr(ref, profile).statistic if np.std(profile) > 0 else float("nan")
        spearman[lang] = float(rho)
        x, y = data[lang]
        ba_all[lang] = _cv_ba(x, y, folds)
        if lang == reference:
            ba_top[lang] = _cv_ba(x, y, folds, select_top=True)
        else:
            ba_top[lang] = _cv_ba(x[:, _kept_columns(top_idx)], y, folds)
    return Importance(names, profiles, spearman, ba_all, ba_top, [names[i] for i in top_idx])


def top_importances(x: np.ndarray, y: np.ndarray) -> list[float]:
    """Gini importances of a random forest (A.3's) on the rows."""
    forest = fit_module(MODULES["rf"](), x, y)
    return [float(v) for v in forest.feature_importances_]


def _top(importances: np.ndarray | list[float]) -> list[int]:
    return list(np.argsort(-np.asarray(importances), kind="stable")[:TOP_K])


def _kept_columns(top_idx: list[int]) -> list[int]:
    """The kept criteria in their original column order: the forest depends on column order,
    so reordering alone would change the BA even when every criterion is kept."""
    return sorted(top_idx)


def _cv_ba(x: np.ndarray, y: np.ndarray, folds: int, select_top: bool = False) -> float:
    """Cross-validated BA of the random forest; `select_top` keeps, in each fold, the TOP_K
    criteria most important on that fold's training rows."""
    k = int(min(folds, np.bincount(y, minlength=2).min()))
    if k < 2:
        return float("nan")
    splitter = StratifiedKFold(n_splits=k, shuffle=True, random_state=RANDOM_STATE)
    predictions = np.empty_like(y)
    for fit_idx, test_idx in splitter.split(x, y):
        columns = list(range(x.shape[1]))
        if select_top:
            columns = _kept_columns(_top(top_importances(x[fit_idx], y[fit_idx])))
        model = fit_module(MODULES["rf"](), x[fit_idx][:, columns], y[fit_idx])
        predictions[test_idx] = verdicts([model], x[test_idx][:, columns])
    return balanced_accuracy(y, predictions)


# -- 5.4 transfer modules, 5.5 aggregator -------------------------------------------------------


def module_comparison(
    train: list[ScoreRecord],
    targets: list[ScoreRecord],
    criteria: CriteriaSet,
    *,
    features: str = "concept",
    seeds: int = 1,
) -> dict[str, dict[str, float]]:
    """Each module trained on English (`seeds` of it, averaged as `fit --seeds` does): BA per
    target language and their average ("avg")."""
    names = feature_names(criteria, features)
    x, y = _xy([r for r in train if r.label is not None and r.error is None], names, features)
    evaluations = {lang: _xy(recs, names, features) for lang, recs in by_language(targets).items()}
    if not evaluations:
        raise InputError("no labelled target-language scores to evaluate on")
    table = {}
    for name, make in MODULES.items():
        models = [fit_module(make(RANDOM_STATE + i), x, y) for i in range(seeds)]
        row = {
            lang: balanced_accuracy(ye, verdicts(models, xe))
            for lang, (xe, ye) in evaluations.items()
        }
        row["avg"] = float(np.mean(list(row.values())))
        table[name] = row
    return table


def average_ba(rows: list[dict], langs: list[str] | None = None) -> dict[str, float]:
    """BA per language of prediction rows (no verdict = wrong) and the average over languages."""
    from ucsj.metrics import language_metrics

    grouped: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        if row.get("label") is not None:
            grouped[row["lang"]].append(row)
    out = {}
    for lang, group in sorted(grouped.items()):
        if langs is None or lang in langs:
            out[lang] = language_metrics(
                lang, [r["label"] for r in group], [r.get("pred") for r in group]
            ).ba
    out["avg"] = float(np.mean(list(out.values()))) if out else float("nan")
    return out


# -- 5.6 decomposition cost ----------------------------------------------------------------------


def decomposition_costs(
    records: list[ScoreRecord], raw_usage: list[dict], latencies: list[float] | None = None
) -> dict[str, float | None]:
    """Calls and prompt/completion tokens per sample, from the scores' `usage` records, and
    the server's seconds per sample from the cache's recorded latencies when given."""
    n = max(len(raw_usage), 1)
    return {
        "llm_seconds_per_sample": float(np.mean(latencies)) if latencies else None,
        "calls_per_sample": sum(u.get("calls", 0) for u in raw_usage) / n,
        "prompt_tokens_per_sample": sum(u.get("prompt_tokens", 0) for u in raw_usage) / n,
        "completion_tokens_per_sample": sum(u.get("completion_tokens", 0) for u in raw_usage) / n,
        "samples": len(records),
    }


def recorded_latencies(raw_records: list[dict], cache: ResponseCache) -> list[float]:
    """Per sample, the summed server time the cache recorded for its calls (the `keys` of a
    scores record): a sequential server's wall time. Samples with a call the cache lacks are
    left out."""
    totals = []
    for record in raw_records:
        entries = [cache.get(key) for key in record.get("keys", {}).values()]
        if entries and all(e is not None for e in entries):
            totals.append(sum(float(e.get("meta", {}).get("latency_s") or 0.0) for e in entries))
    return totals
