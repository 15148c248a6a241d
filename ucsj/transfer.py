"""Stage 3: a light model trained on English scores, applied unchanged to other languages.

Three targets, one per task kind:
- `label` (binary): the six classifiers of the UCS paper, appendix A.3, on s(x) or z(x).
- `score` (pointwise): the same six modules as regressors on s(x), predicting a score on the
  training scale; `logreg` is ordinal, the expected score under a multinomial over the scale.
- `preference` (pairwise): the six classifiers on the difference s(a) - s(b), trained on both
  orders of every pair so that no response position is favoured.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.ensemble import (
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.svm import SVC, SVR

from ucsj import __version__
from ucsj.criteria import CriteriaSet
from ucsj.errors import InputError
from ucsj.judge_file import JUDGE_FORMAT
from ucsj.metrics import balanced_accuracy, kendall_tau
from ucsj.scores import TARGETS, ScoreRecord
from ucsj.transfer_options import FEATURE_KINDS, MODULE_NAMES

RANDOM_STATE = 42
IMPUTE = 0.5  # an unreadable answer carries no evidence either way
VALIDATION_SHARE = 0.25

# Appendix A.3 of the UCS paper, all in one place. Order breaks ties in --module auto.
MODULES: dict[str, Callable[[], BaseEstimator]] = {
    "mlp": lambda: MLPClassifier(
        hidden_layer_sizes=(32,), learning_rate_init=0.01, max_iter=2000, random_state=RANDOM_STATE
    ),
    "logreg": lambda: LogisticRegression(
        C=0.1, max_iter=2000, class_weight="balanced", random_state=RANDOM_STATE
    ),
    "svm": lambda: SVC(
        C=0.1, gamma="scale", probability=True, class_weight="balanced", random_state=RANDOM_STATE
    ),
    "rf": lambda: RandomForestClassifier(
        n_estimators=200, max_depth=10, class_weight="balanced", random_state=RANDOM_STATE
    ),
    "gb": lambda: GradientBoostingClassifier(
        n_estimators=100, max_depth=5, learning_rate=0.1, random_state=RANDOM_STATE
    ),
    "knn": lambda: KNeighborsClassifier(n_neighbors=5),
}
# The same modules for a score: A.3's sizes and rates where they carry over to regression,
# scikit-learn's defaults where A.3 has no counterpart (SVR's C and epsilon). The paper's
# logistic regression stays a classifier over the scale's values; its expected value is the
# prediction, which keeps the order of the scale (an ordinal reading).
SCORE_MODULES: dict[str, Callable[[], BaseEstimator]] = {
    "mlp": lambda: MLPRegressor(
        hidden_layer_sizes=(32,), learning_rate_init=0.01, max_iter=2000, random_state=RANDOM_STATE
    ),
    "logreg": lambda: LogisticRegression(C=0.1, max_iter=2000, random_state=RANDOM_STATE),
    "svm": lambda: SVR(gamma="scale"),
    "rf": lambda: RandomForestRegressor(n_estimators=200, max_depth=10, random_state=RANDOM_STATE),
    "gb": lambda: GradientBoostingRegressor(
        n_estimators=100, max_depth=5, learning_rate=0.1, random_state=RANDOM_STATE
    ),
    "knn": lambda: KNeighborsRegressor(n_neighbors=5),
}
# The command line offers these names without importing this module.
assert tuple(MODULES) == tuple(SCORE_MODULES) == MODULE_NAMES


def feature_names(criteria: CriteriaSet, kind: str) -> list[str]:
    if kind == "concept":
        return [c.id for c in criteria.concepts]
    if kind == "criterion":
        return [q.id for q in criteria.questions]
    raise InputError(f"--features must be one of {', '.join(FEATURE_KINDS)}")


def feature_matrix(
    records: Iterable[ScoreRecord], names: list[str], kind: str, response: str = "a"
) -> np.ndarray:
    """Rows of s(x) or z(x) in `names` order; unreadable values imputed with 0.5. `response`
    "b" reads a pairwise record's second response."""
    field_name = ("s" if kind == "concept" else "z") + ("_b" if response == "b" else "")
    rows = [
        [
            IMPUTE if (v := (getattr(r, field_name) or {}).get(n)) is None else float(v)
            for n in names
        ]
        for r in records
    ]
    return np.asarray(rows, dtype=float).reshape(-1, len(names))


def pair_differences(records: list[ScoreRecord], names: list[str], kind: str) -> np.ndarray:
    """s(a) - s(b) per pair: positive where the first response answers better."""
    return feature_matrix(records, names, kind, "a") - feature_matrix(records, names, kind, "b")


# -- the three targets ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """How one gold field is learned: the modules, the training rows, the validation metric."""

    name: str
    modules: dict[str, Callable[[], BaseEstimator]]
    metric: str  # what --module auto maximises on the English validation split

    def training_rows(
        self, records: list[ScoreRecord], names: list[str], kind: str
    ) -> tuple[np.ndarray, np.ndarray]:
        if self.name == "preference":
            return both_orders(
                pair_differences(records, names, kind),
                np.asarray([r.preference == "a" for r in records], dtype=int),
            )
        return feature_matrix(records, names, kind), np.asarray(
            [r.gold for r in records], dtype=int
        )

    def validation_score(self, model: BaseEstimator, x: np.ndarray, y: np.ndarray) -> float:
        if self.name == "label":
            return balanced_accuracy(y, model.predict(x))
        if self.name == "score":
            return kendall_tau(y, predicted_scores(model, x))
        # preference: accuracy over both orders of each held-out pair
        forward = model.predict(x)
        backward = model.predict(-x)
        return float((np.mean(forward == y) + np.mean(backward == 1 - y)) / 2)


TARGET_SPECS = {
    "label": Target("label", MODULES, "balanced accuracy"),
    "score": Target("score", SCORE_MODULES, "Kendall's tau"),
    "preference": Target("preference", MODULES, "pairwise accuracy"),
}


def both_orders(differences: np.ndarray, first_better: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every pair as given and swapped: d with its label, -d with the opposite one."""
    return np.vstack([differences, -differences]), np.concatenate([first_better, 1 - first_better])


def predicted_scores(model: BaseEstimator, x: np.ndarray) -> np.ndarray:
    """A regressor's prediction, or a classifier's expected value over the scale."""
    if hasattr(model, "predict_proba"):
        return model.predict_proba(x) @ model.classes_.astype(float)
    return np.asarray(model.predict(x), dtype=float)


@dataclass(frozen=True)
class ModuleChoice:
    module: str
    table: dict[str, float]  # module -> validation metric (auto only)


def choose_module(x: np.ndarray, y: np.ndarray, target: str = "label") -> ModuleChoice:
    """Pick the module with the best validation metric on a seeded English split (stratified
    when every class allows it). Pairs are split before being doubled, so a pair never sits
    on both sides."""
    spec = TARGET_SPECS[target]
    if target == "preference":
        half = len(y) // 2
        x, y = x[:half], y[:half]  # the pairs as given; their swapped copies follow
    counts = np.unique(y, return_counts=True)[1]
    # stratifying needs two of every class and a validation set with room for each
    stratify = counts.min() >= 2 and math.ceil(VALIDATION_SHARE * len(y)) >= len(counts)
    x_train, x_val, y_train, y_val = train_test_split(
        x,
        y,
        test_size=VALIDATION_SHARE,
        stratify=y if stratify else None,
        random_state=RANDOM_STATE,
    )
    if target == "preference":
        x_train, y_train = both_orders(x_train, y_train)
    table = {}
    for name, make in spec.modules.items():
        try:
            model = fit_module(make(), x_train, y_train)
            table[name] = spec.validation_score(model, x_val, y_val)
        except ValueError:  # too few samples for this module (knn's 5 neighbours, one class)
            table[name] = float("nan")
    best = max(table, key=lambda n: -math.inf if math.isnan(table[n]) else table[n])
    return ModuleChoice(best, table)


def fit_module(estimator: BaseEstimator, x: np.ndarray, y: np.ndarray) -> BaseEstimator:
    """Fit, silencing scikit-learn 1.9's deprecation notice for SVC(probability=True): the
    paper's SVM uses probability estimates, and the notice is about sklearn's API, not the data.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*probability.*", category=FutureWarning)
        return estimator.fit(x, y)


def fit_judge(
    records: list[ScoreRecord],
    criteria: CriteriaSet,
    *,
    module: str = "auto",
    features: str = "concept",
    target: str | None = None,
    source: str = "",
) -> dict[str, Any]:
    """Fit the transfer module on the gold values of English scores; return the judge
    (estimator + metadata). `target` defaults to what the scores carry."""
    _check_consistent(records, criteria, source)
    target = _check_target(records, target, source)
    spec = TARGET_SPECS[target]
    usable = [r for r in records if r.gold is not None and r.error is None]
    if len(usable) < 4:
        raise InputError(
            f"{len(usable)} successfully scored samples with a '{target}': at least 4 are "
            "needed to fit",
            path=source,
        )
    _check_classes(usable, target, source)
    names = feature_names(criteria, features)
    x, y = spec.training_rows(usable, names, features)
    choice = ModuleChoice(module, {})
    if module == "auto":
        choice = choose_module(x, y, target)
    elif module not in spec.modules:
        raise InputError(f"--module must be auto or one of {', '.join(spec.modules)}")
    try:
        estimator = fit_module(spec.modules[choice.module](), x, y)
        estimator.predict(x[:1])  # knn, for one, only fails here when it has too few samples
    except ValueError as exc:
        raise InputError(
            f"cannot fit {choice.module} on {len(usable)} samples: {exc}", path=source
        ) from None
    gold = [r.gold for r in usable]
    return {
        "format": JUDGE_FORMAT,
        "estimator": estimator,
        "meta": {
            "target": target,
            "module": choice.module,
            "validation_metric": spec.metric,
            "validation": choice.table,
            "features": features,
            "feature_names": names,
            "criteria": criteria.to_json(),
            "criteria_fingerprint": criteria.fingerprint,
            "scoring_model": usable[0].model,
            "scoring": usable[0].scoring,
            "train_langs": sorted({r.lang for r in usable}),
            "train_size": len(usable),
            "train_counts": {str(v): gold.count(v) for v in sorted(set(gold))},
            "ucsj_version": __version__,
        },
    }


def _check_target(records: list[ScoreRecord], target: str | None, source: str) -> str:
    carried = TARGETS[records[0].kind]
    for r in records:
        if r.kind != records[0].kind:
            raise InputError(
                f"sample '{r.id}' was scored for a {r.kind} task, others for a "
                f"{records[0].kind} one",
                path=source,
            )
    if target is not None and target != carried:
        raise InputError(
            f"--target {target}: these scores are from a {records[0].kind} task and carry "
            f"'{carried}' as their gold value",
            path=source,
        )
    return carried


def _check_classes(usable: list[ScoreRecord], target: str, source: str) -> None:
    values = [r.gold for r in usable]
    if target == "label":
        counts = np.bincount(values, minlength=2)
        if counts.min() < 2:
            raise InputError(
                f"training labels need both classes at least twice (0: {counts[0]}, "
                f"1: {counts[1]})",
                path=source,
            )
    elif target == "score" and len(set(values)) < 2:
        raise InputError(
            f"every training sample has score {values[0]}: at least two values are needed",
            path=source,
        )


def _check_consistent(records: list[ScoreRecord], criteria: CriteriaSet, source: str) -> None:
    for field_name, expected in (
        ("criteria", criteria.fingerprint),
        ("model", records[0].model),
        ("scoring", records[0].scoring),
    ):
        for r in records:
            if getattr(r, field_name) != expected:
                raise InputError(
                    f"sample '{r.id}' was scored with {field_name} '{getattr(r, field_name)}', "
                    f"others with '{expected}'; score them all the same way",
                    path=source,
                )


# -- predictions --------------------------------------------------------------------------------


def predict_records(
    judge: dict[str, Any], records: list[ScoreRecord], source: str = ""
) -> list[dict[str, Any]]:
    """Predictions for scores made with the judge's criteria and scoring model."""
    meta = judge["meta"]
    target = meta.get("target", "label")
    for r in records:
        if r.criteria != meta["criteria_fingerprint"]:
            raise InputError(
                f"sample '{r.id}' was scored with criteria {r.criteria[:19]}…, but "
                f"the judge was trained on {meta['criteria_fingerprint'][:19]}…",
                path=source,
            )
        if r.model != meta["scoring_model"]:
            raise InputError(
                f"sample '{r.id}' was scored by model '{r.model}', but the judge "
                f"was trained on scores from '{meta['scoring_model']}'",
                path=source,
            )
        if TARGETS[r.kind] != target:
            raise InputError(
                f"sample '{r.id}' was scored for a {r.kind} task, but the judge predicts "
                f"'{target}'",
                path=source,
            )
    if not records:
        return []
    names, kind, estimator = meta["feature_names"], meta["features"], judge["estimator"]
    method = f"ucs-{meta['module']}"
    if target == "label":
        probs = estimator.predict_proba(feature_matrix(records, names, kind))[:, 1]
        verdicts = [{"prob": round(float(p), 6), "pred": int(p >= 0.5)} for p in probs]
    elif target == "score":
        low, high = (int(v) for v in min_max(meta["train_counts"]))
        values = np.clip(
            predicted_scores(estimator, feature_matrix(records, names, kind)), low, high
        )
        verdicts = [{"pred": round(float(v), 6)} for v in values]
    else:
        d = pair_differences(records, names, kind)
        forward = estimator.predict_proba(d)[:, 1]  # P(first better), pair as given
        swapped = estimator.predict_proba(-d)[:, 1]  # P(first better), pair swapped: b first
        verdicts = [
            {
                "prob": round(float(f), 6),
                "pred": "a" if f >= 0.5 else "b",
                "pred_swapped": "b" if s >= 0.5 else "a",
            }
            for f, s in zip(forward, swapped, strict=True)
        ]
    out = []
    for r, verdict in zip(records, verdicts, strict=True):
        values = list(r.z.values()) + list((r.z_b or {}).values())
        row = {
            "id": r.id,
            "lang": r.lang,
            **r.gold_fields(),
            **r.groups,
            "method": method,
            **verdict,
            "unreadable": round(sum(v is None for v in values) / max(len(values), 1), 6),
            "model": r.model,  # the scoring model and criteria, for the report's provenance
            "criteria": r.criteria,
        }
        if r.error:
            row.update({key: None for key in verdict}, error=r.error)
        out.append(row)
    return out


def min_max(counts: dict[str, int]) -> tuple[float, float]:
    values = [float(k) for k in counts]
    return min(values), max(values)
