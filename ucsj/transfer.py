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
from sklearn.model_selection import RepeatedKFold, RepeatedStratifiedKFold
from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.svm import SVC, SVR

from ucsj import __version__
from ucsj.criteria import CriteriaSet
from ucsj.errors import InputError
from ucsj.judge_file import JUDGE_FORMAT
from ucsj.metrics import balanced_accuracy, kendall_tau
from ucsj.scores import TARGETS, ScoreRecord
from ucsj.transfer_options import FEATURE_KINDS, MODULE_NAMES, RANDOM_STATE

IMPUTE = 0.5  # an unreadable answer carries no evidence either way
# --module auto: repeated K-fold cross-validation on the English data (seeded, stratified for
# labels, preferences and, where every value allows it, scores), then the one-standard-error
# rule towards the simplest module.
CV_FOLDS = 5
CV_REPEATS = 3
SIMPLEST_FIRST = ("logreg", "svm", "knn", "rf", "gb", "mlp")

# Appendix A.3 of the UCS paper, all in one place; `seed` is the random_state (42, then 43, ...
# for `fit --seeds N`).
MODULES: dict[str, Callable[..., BaseEstimator]] = {
    "mlp": lambda seed=RANDOM_STATE: MLPClassifier(
        hidden_layer_sizes=(32,), learning_rate_init=0.01, max_iter=2000, random_state=seed
    ),
    "logreg": lambda seed=RANDOM_STATE: LogisticRegression(
        C=0.1, max_iter=2000, class_weight="balanced", random_state=seed
    ),
    "svm": lambda seed=RANDOM_STATE: SVC(
        C=0.1, gamma="scale", probability=True, class_weight="balanced", random_state=seed
    ),
    "rf": lambda seed=RANDOM_STATE: RandomForestClassifier(
        n_estimators=200, max_depth=10, class_weight="balanced", random_state=seed
    ),
    "gb": lambda seed=RANDOM_STATE: GradientBoostingClassifier(
        n_estimators=100, max_depth=5, learning_rate=0.1, random_state=seed
    ),
    "knn": lambda seed=RANDOM_STATE: KNeighborsClassifier(n_neighbors=5),
}
# The same modules for a score: A.3's sizes and rates where they carry over to regression,
# scikit-learn's defaults where A.3 has no counterpart (SVR's C and epsilon). The paper's
# logistic regression stays a classifier over the scale's values; its expected value is the
# prediction, which keeps the order of the scale (an ordinal reading).
SCORE_MODULES: dict[str, Callable[..., BaseEstimator]] = {
    "mlp": lambda seed=RANDOM_STATE: MLPRegressor(
        hidden_layer_sizes=(32,), learning_rate_init=0.01, max_iter=2000, random_state=seed
    ),
    "logreg": lambda seed=RANDOM_STATE: LogisticRegression(C=0.1, max_iter=2000, random_state=seed),
    "svm": lambda seed=RANDOM_STATE: SVR(gamma="scale"),
    "rf": lambda seed=RANDOM_STATE: RandomForestRegressor(
        n_estimators=200, max_depth=10, random_state=seed
    ),
    "gb": lambda seed=RANDOM_STATE: GradientBoostingRegressor(
        n_estimators=100, max_depth=5, learning_rate=0.1, random_state=seed
    ),
    "knn": lambda seed=RANDOM_STATE: KNeighborsRegressor(n_neighbors=5),
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
    modules: dict[str, Callable[..., BaseEstimator]]
    metric: str  # what --module auto maximises in cross-validation on the English data

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

    def validation_score(self, models: list[BaseEstimator], x: np.ndarray, y: np.ndarray) -> float:
        """The metric on held-out rows, with the decision rule predictions use (`decide`)."""
        if self.name == "label":
            return balanced_accuracy(y, verdicts(models, x))
        if self.name == "score":
            return kendall_tau(y, decide_scores(models, x)[0])
        # preference: accuracy over both orders of each held-out pair
        forward = verdicts(models, x)
        backward = verdicts(models, -x)
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
class Decision:
    """What a judge says about rows: the mean P(pass or first better) over its seeds, the
    spread of that probability between seeds, and the verdict."""

    prob: np.ndarray
    spread: np.ndarray
    pred: np.ndarray


def decide(models: list[BaseEstimator], x: np.ndarray) -> Decision:
    """The one decision rule of every classifier judge, used by fit's cross-validation,
    predict and the analyses: each seed's own verdict (`predict()`, the paper's and
    scikit-learn's rule; for the SVM it differs from thresholding its Platt-calibrated
    probability), the majority over seeds, a tie broken by the mean probability >= 0.5."""
    probs = np.asarray([m.predict_proba(x)[:, 1] for m in models])
    votes = np.asarray([m.predict(x) for m in models], dtype=float).mean(axis=0)
    prob = probs.mean(axis=0)
    pred = np.where(votes == 0.5, prob >= 0.5, votes > 0.5).astype(int)
    return Decision(prob, probs.std(axis=0), pred)


def verdicts(models: list[BaseEstimator], x: np.ndarray) -> np.ndarray:
    """`decide(models, x).pred` without the probabilities a single model's verdict never needs
    (cross-validation asks for verdicts only: predict_proba would double its inference)."""
    if len(models) == 1:
        return np.asarray(models[0].predict(x)).astype(int)
    return decide(models, x).pred


def decide_scores(models: list[BaseEstimator], x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The mean predicted score over seeds and its spread."""
    values = np.asarray([predicted_scores(m, x) for m in models])
    return values.mean(axis=0), values.std(axis=0)


@dataclass(frozen=True)
class ModuleChoice:
    module: str
    table: dict[str, float]  # module -> mean cross-validated metric (auto only)
    sd: dict[str, float]  # module -> its standard deviation over the folds
    folds: int = 0  # held-out folds per module (folds x repeats)
    reason: str = ""  # why the module was taken


def cv_splits(
    y: np.ndarray, target: str, folds: int = CV_FOLDS, repeats: int = CV_REPEATS
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Seeded repeated K-fold splits, stratified on the labels or preferences (and on scores
    when every score value has a member in each fold)."""
    counts = np.unique(y, return_counts=True)[1]
    if target == "score":
        k = max(2, min(folds, len(y) // 2))
        stratify = counts.min() >= k
    else:
        k = max(2, min(folds, int(counts.min())))
        stratify = True
    kind = RepeatedStratifiedKFold if stratify else RepeatedKFold
    splitter = kind(n_splits=k, n_repeats=repeats, random_state=RANDOM_STATE)
    return list(splitter.split(np.zeros((len(y), 1)), y))


def choose_module(
    x: np.ndarray,
    y: np.ndarray,
    target: str = "label",
    *,
    folds: int = CV_FOLDS,
    repeats: int = CV_REPEATS,
) -> ModuleChoice:
    """Every module's metric over seeded repeated K-fold cross-validation on the English data,
    then the one-standard-error rule: of the modules whose mean is within one standard error
    (sd over the folds / sqrt(folds)) of the best mean, the simplest (SIMPLEST_FIRST). A
    single split of a few hundred samples mostly picks noise; the simpler modules carry over
    to other languages better. Pairs are split before being doubled, so a pair never sits on
    both sides."""
    spec = TARGET_SPECS[target]
    if target == "preference":
        half = len(y) // 2
        x, y = x[:half], y[:half]  # the pairs as given; their swapped copies follow
    splits = cv_splits(y, target, folds, repeats)
    table, sd = {}, {}
    for name in SIMPLEST_FIRST:
        scores = [_fold_score(spec, name, x, y, train, test) for train, test in splits]
        valid = [v for v in scores if not math.isnan(v)]
        if len(valid) < len(scores):  # a module that cannot fit some folds is not compared
            table[name], sd[name] = float("nan"), float("nan")
            continue
        table[name], sd[name] = float(np.mean(valid)), float(np.std(valid, ddof=1))
    defined = [n for n in SIMPLEST_FIRST if not math.isnan(table[n])]
    if not defined:
        return ModuleChoice(
            "logreg",
            table,
            sd,
            len(splits),
            "no module could be compared on these few samples; took logreg, the simplest",
        )
    best = max(defined, key=lambda n: table[n])  # the simpler one on an exact tie
    standard_error = sd[best] / math.sqrt(len(splits))
    chosen = next(n for n in defined if table[n] >= table[best] - standard_error)
    if chosen == best:
        reason = f"{best} has the best mean {spec.metric}"
    else:
        reason = (
            f"{chosen} is within one standard error ({standard_error:.3f}) of the best, "
            f"{best} ({table[best]:.3f}), and simpler: took {chosen}"
        )
    return ModuleChoice(chosen, table, sd, len(splits), reason)


def _fold_score(
    spec: Target, name: str, x: np.ndarray, y: np.ndarray, train: np.ndarray, test: np.ndarray
) -> float:
    x_train, y_train = x[train], y[train]
    if spec.name == "preference":
        x_train, y_train = both_orders(x_train, y_train)
    try:
        model = fit_module(spec.modules[name](), x_train, y_train)
        return spec.validation_score([model], x[test], y[test])
    except ValueError:  # too few samples for this module (knn's 5 neighbours)
        return float("nan")


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
    seeds: int = 1,
    source: str = "",
) -> dict[str, Any]:
    """Fit the transfer module on the gold values of English scores; return the judge
    (estimators + metadata). `target` defaults to what the scores carry; `seeds` trains the
    module with random_state 42, 43, ... and predictions average them."""
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
    if seeds < 1:
        raise InputError(f"--seeds must be at least 1, got {seeds}")
    choice = ModuleChoice(module, {}, {})
    if module == "auto":
        choice = choose_module(x, y, target)
    elif module not in spec.modules:
        raise InputError(f"--module must be auto or one of {', '.join(spec.modules)}")
    try:
        estimators = [
            fit_module(spec.modules[choice.module](RANDOM_STATE + i), x, y) for i in range(seeds)
        ]
        estimators[0].predict(x[:1])  # knn, for one, only fails here with too few samples
    except ValueError as exc:
        raise InputError(
            f"cannot fit {choice.module} on {len(usable)} samples: {exc}", path=source
        ) from None
    gold = [r.gold for r in usable]
    return {
        "format": JUDGE_FORMAT,
        "estimator": estimators[0],  # the seed-42 module: what judge files before seeds held
        "estimators": estimators,
        "reference": _answer_reference(usable, criteria, target, estimators, x),
        "meta": {
            "target": target,
            "module": choice.module,
            "seeds": seeds,
            "validation_metric": spec.metric,
            "validation": choice.table,  # module -> mean over the cross-validation folds
            "validation_sd": choice.sd,
            "validation_folds": choice.folds,
            "selection": choice.reason,
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


def _answer_reference(
    usable: list[ScoreRecord],
    criteria: CriteriaSet,
    target: str,
    models: list[BaseEstimator],
    x: np.ndarray,
) -> dict[str, Any]:
    """What `analyze shift`, predict's warnings and --align compare other languages with."""
    from ucsj.shift import build_reference

    if target != "label":
        return build_reference(usable, criteria)
    return build_reference(
        usable,
        criteria,
        labels=np.asarray([r.gold for r in usable]),
        predicted_pass_rate=round(float(np.mean(verdicts(models, x))), 6),
    )


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
    for r in records:
        if r.criteria != criteria.fingerprint:
            raise InputError(
                f"sample '{r.id}' was scored with criteria {r.criteria[:19]}…, but the criteria "
                f"given have fingerprint {criteria.fingerprint[:19]}…: give the criteria file "
                "it was scored with",
                path=source,
            )
    for field_name, expected in (
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
    judge: dict[str, Any], records: list[ScoreRecord], source: str = "", align: str = "none"
) -> list[dict[str, Any]]:
    """Predictions for scores made with the judge's criteria, scoring model and granularity.
    `align` (standardize, prior) adjusts each language to the English reference first
    (ucsj.shift); prior matching decides by the shifted mean probability >= 0.5."""
    from ucsj.shift import check_alignment

    check_alignment(judge, align)
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
        if r.scoring != meta["scoring"]:
            raise InputError(
                f"sample '{r.id}' was scored {r.scoring} (--scoring), but the judge was "
                f"trained on {meta['scoring']} scores; score it {meta['scoring']}",
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
    names, kind = meta["feature_names"], meta["features"]
    models = judge_estimators(judge)
    spread = len(models) > 1  # the spread between seeds is only reported when there are some
    method = f"ucs-{meta['module']}" + ("" if align == "none" else f"+{align}")
    if target == "label":
        decision = decide(models, _aligned_features(judge, records, align))
        probs, preds = decision.prob, decision.pred
        if align == "prior":
            from ucsj.shift import language_groups, match_prior

            pass_rate = judge["reference"]["predicted_pass_rate"]
            probs = match_prior(probs, language_groups(records), pass_rate)
            preds = (probs >= 0.5).astype(int)
        verdicts = [
            {
                "prob": round(float(p), 6),
                **({"prob_sd": round(float(sd), 6)} if spread else {}),
                "pred": int(v),
            }
            for p, sd, v in zip(probs, decision.spread, preds, strict=True)
        ]
    elif target == "score":
        low, high = (int(v) for v in min_max(meta["train_counts"]))
        values, sds = decide_scores(models, _aligned_features(judge, records, align))
        verdicts = [
            {
                "pred": round(float(v), 6),
                **({"pred_sd": round(float(sd), 6)} if spread else {}),
            }
            for v, sd in zip(np.clip(values, low, high), sds, strict=True)
        ]
    else:
        d = pair_differences(records, names, kind)
        forward = decide(models, d)  # P(first better), pair as given
        swapped = decide(models, -d)  # P(first better), pair swapped: b first
        verdicts = [
            {
                "prob": round(float(f), 6),
                **({"prob_sd": round(float(sd), 6)} if spread else {}),
                "pred": "a" if fv else "b",
                "pred_swapped": "b" if sv else "a",
            }
            for f, sd, fv, sv in zip(
                forward.prob, forward.spread, forward.pred, swapped.pred, strict=True
            )
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


def _aligned_features(judge: dict[str, Any], records: list[ScoreRecord], align: str) -> np.ndarray:
    """The judge's features, standardized per language against the reference when asked."""
    meta = judge["meta"]
    x = feature_matrix(records, meta["feature_names"], meta["features"])
    if align != "standardize":
        return x
    from ucsj.shift import language_groups, standardize

    part = judge["reference"][meta["features"]]
    return standardize(x, language_groups(records), part["mean"], part["std"])


def judge_estimators(judge: dict[str, Any]) -> list[BaseEstimator]:
    """The judge's fitted modules, one per seed (judge files from before `--seeds` hold one)."""
    return list(judge.get("estimators") or [judge["estimator"]])


def min_max(counts: dict[str, int]) -> tuple[float, float]:
    values = [float(k) for k in counts]
    return min(values), max(values)
