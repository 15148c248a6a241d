"""Stage 3: a light classifier trained on English scores, applied unchanged to other languages.

The six transfer modules and their hyperparameters follow the UCS paper, appendix A.3.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.neighbors import KNeighborsClassifier
from sklearn.neural_network import MLPClassifier
from sklearn.svm import SVC

from ucsj import __version__
from ucsj.criteria import CriteriaSet
from ucsj.errors import InputError
from ucsj.io import read_json_lines
from ucsj.metrics import balanced_accuracy

RANDOM_STATE = 42
IMPUTE = 0.5  # an unreadable answer carries no evidence either way
VALIDATION_SHARE = 0.25
JUDGE_FORMAT = "ucsj.judge/1"
FEATURE_KINDS = ("concept", "criterion")

# Appendix A.3 of the UCS paper, all in one place. Order breaks ties in --module auto.
MODULES: dict[str, Callable[[], ClassifierMixin]] = {
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


@dataclass(frozen=True)
class ScoreRecord:
    id: str
    lang: str
    label: int | None
    z: dict[str, float | None]
    s: dict[str, float | None]
    criteria: str
    model: str
    scoring: str
    error: str | None


def read_scores(path: str | Path) -> list[ScoreRecord]:
    records = []
    for line, raw in read_json_lines(path):
        records.append(score_record(raw, str(path), line))
    if not records:
        raise InputError("no records: the scores file is empty", path=str(path))
    return records


def score_record(raw: Any, path: str, line: int) -> ScoreRecord:
    if not isinstance(raw, dict):
        raise InputError("record is not a JSON object", path=path, line=line)
    for name, kind in (
        ("id", str),
        ("lang", str),
        ("z", dict),
        ("s", dict),
        ("criteria", str),
        ("model", str),
        ("scoring", str),
    ):
        if not isinstance(raw.get(name), kind):
            raise InputError(
                "missing or of the wrong type (is this a scores file from `ucsj score`?)",
                path=path,
                line=line,
                field=name,
            )
    label = raw.get("label")
    if label not in (None, 0, 1) or isinstance(label, float):
        raise InputError(
            f"must be 0, 1 or null, got {label!r}", path=path, line=line, field="label"
        )
    for field in ("z", "s"):
        for key, value in raw[field].items():
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1
            ):
                raise InputError(
                    f"'{key}' must be a number in [0, 1] or null", path=path, line=line, field=field
                )
    return ScoreRecord(
        raw["id"],
        raw["lang"],
        label,
        raw["z"],
        raw["s"],
        raw["criteria"],
        raw["model"],
        raw["scoring"],
        raw.get("error"),
    )


def feature_names(criteria: CriteriaSet, kind: str) -> list[str]:
    if kind == "concept":
        return [c.id for c in criteria.concepts]
    if kind == "criterion":
        return [q.id for q in criteria.questions]
    raise InputError(f"--features must be one of {', '.join(FEATURE_KINDS)}")


def feature_matrix(records: Iterable[ScoreRecord], names: list[str], kind: str) -> np.ndarray:
    """Rows of s(x) or z(x) in `names` order; unreadable values imputed with 0.5."""
    field = "s" if kind == "concept" else "z"
    rows = [
        [IMPUTE if (v := getattr(r, field).get(n)) is None else float(v) for n in names]
        for r in records
    ]
    return np.asarray(rows, dtype=float).reshape(-1, len(names))


@dataclass(frozen=True)
class ModuleChoice:
    module: str
    table: dict[str, float]  # module -> validation balanced accuracy (auto only)


def choose_module(x: np.ndarray, y: np.ndarray) -> ModuleChoice:
    """Pick the module with the best balanced accuracy on a stratified, seeded English split."""
    x_train, x_val, y_train, y_val = train_test_split(
        x, y, test_size=VALIDATION_SHARE, stratify=y, random_state=RANDOM_STATE
    )
    table = {}
    for name, make in MODULES.items():
        model = fit_module(make(), x_train, y_train)
        table[name] = balanced_accuracy(y_val, model.predict(x_val))
    best = max(table, key=lambda n: table[n])  # first listed wins a tie
    return ModuleChoice(best, table)


def fit_module(estimator: ClassifierMixin, x: np.ndarray, y: np.ndarray) -> ClassifierMixin:
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
    source: str = "",
) -> dict[str, Any]:
    """Fit the transfer module on labelled scores; return the judge (estimator + metadata)."""
    _check_consistent(records, criteria, source)
    labelled = [r for r in records if r.label is not None and r.error is None]
    if len(labelled) < 4:
        raise InputError(
            f"{len(labelled)} labelled, successfully scored samples: at least 4 are needed to fit",
            path=source,
        )
    y = np.asarray([r.label for r in labelled], dtype=int)
    counts = np.bincount(y, minlength=2)
    if counts.min() < 2:
        raise InputError(
            f"training labels need both classes at least twice (0: {counts[0]}, 1: {counts[1]})",
            path=source,
        )
    names = feature_names(criteria, features)
    x = feature_matrix(labelled, names, features)
    choice = ModuleChoice(module, {})
    if module == "auto":
        choice = choose_module(x, y)
    elif module not in MODULES:
        raise InputError(f"--module must be auto or one of {', '.join(MODULES)}")
    estimator = fit_module(MODULES[choice.module](), x, y)
    first = labelled[0]
    langs = sorted({r.lang for r in labelled})
    return {
        "format": JUDGE_FORMAT,
        "estimator": estimator,
        "meta": {
            "module": choice.module,
            "validation_ba": choice.table,
            "features": features,
            "feature_names": names,
            "criteria": criteria.to_json(),
            "criteria_fingerprint": criteria.fingerprint,
            "scoring_model": first.model,
            "scoring": first.scoring,
            "train_langs": langs,
            "train_size": len(labelled),
            "train_class_counts": {"0": int(counts[0]), "1": int(counts[1])},
            "ucsj_version": __version__,
        },
    }


def _check_consistent(records: list[ScoreRecord], criteria: CriteriaSet, source: str) -> None:
    for field, expected in (
        ("criteria", criteria.fingerprint),
        ("model", records[0].model),
        ("scoring", records[0].scoring),
    ):
        for r in records:
            if getattr(r, field) != expected:
                raise InputError(
                    f"sample '{r.id}' was scored with {field} '{getattr(r, field)}', "
                    f"others with '{expected}'; score them all the same way",
                    path=source,
                )


# Types a judge file may hold beyond skops' defaults: what the six modules are made of. Anything
# else (a function, an arbitrary class) makes loading refuse the file, so a crafted judge file
# cannot run code the way a pickle can.
TRUSTED_TYPES = (
    "sklearn.neural_network._stochastic_optimizers.AdamOptimizer",
    "sklearn.neural_network._stochastic_optimizers.SGDOptimizer",
    "sklearn.tree._tree.Tree",
    "sklearn.metrics._dist_metrics.EuclideanDistance64",
    "sklearn.neighbors._kd_tree.KDTree",
    "sklearn.neighbors._ball_tree.BallTree",
    "sklearn._loss.loss.HalfBinomialLoss",
    "sklearn._loss.link.LogitLink",
    "sklearn._loss.link.Interval",
    "sklearn.ensemble._gb.GradientBoostingClassifier",
    "sklearn.dummy.DummyClassifier",
)


def save_judge(judge: dict[str, Any], path: str | Path) -> None:
    """Write the judge as a skops file whose bytes depend only on its content."""
    import skops.io

    from ucsj.io import atomic_writer

    with atomic_writer(path, "wb") as out:
        out.write(_stable_zip(skops.io.dumps(judge)))


def _stable_zip(data: bytes) -> bytes:
    """Re-pack a skops archive so that its bytes depend only on its content.

    skops records object ids (`__id__`, and array members named after them), which differ
    between processes, and stamps the time: ids are renumbered in order of first mention and
    members dated 1980-01-01.
    """
    import io
    import re
    import zipfile

    source = zipfile.ZipFile(io.BytesIO(data))
    schema = source.read("schema.json").decode("utf-8")
    pattern = re.compile(r'("__id__": )(\d+)|"(\d+)(\.npy)"')
    order: dict[str, int] = {}
    for match in pattern.finditer(schema):
        order.setdefault(match.group(2) or match.group(3), len(order))

    def renumber(match: re.Match[str]) -> str:
        if match.group(2):
            return f"{match.group(1)}{order[match.group(2)]}"
        return f'"{order[match.group(3)]}{match.group(4)}"'

    entries = [("schema.json", pattern.sub(renumber, schema).encode("utf-8"))]
    for name in source.namelist():
        if name != "schema.json":
            stem, dot, suffix = name.partition(".")
            entries.append((f"{order.get(stem, stem)}{dot}{suffix}", source.read(name)))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as target:
        for name, content in sorted(entries):
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            target.writestr(info, content)
    return buffer.getvalue()


def load_judge(path: str | Path) -> dict[str, Any]:
    """Load a judge file, refusing any that holds types outside skops' safe set and ours."""
    import zipfile

    import skops.io
    from skops.io.exceptions import UntrustedTypesFoundException

    path = Path(path)
    if not path.is_file():
        raise InputError("judge file not found", path=str(path))
    if not zipfile.is_zipfile(path):
        raise InputError(
            "not a judge file written by `ucsj fit` (judge files are skops "
            "archives; pickles are refused because loading one can run code)",
            path=str(path),
        )
    try:
        untrusted = [t for t in skops.io.get_untrusted_types(file=path) if t not in TRUSTED_TYPES]
        if untrusted:
            raise InputError(
                f"judge file holds types ucsj does not load: {', '.join(untrusted)};"
                " refusing it (only `ucsj fit` output is accepted)",
                path=str(path),
            )
        judge = skops.io.load(path, trusted=list(TRUSTED_TYPES))
    except InputError:
        raise
    except UntrustedTypesFoundException as exc:
        raise InputError(
            f"judge file holds untrusted types ({exc}); refusing it", path=str(path)
        ) from None
    except Exception as exc:  # a truncated or foreign archive raises many kinds of error
        raise InputError(
            f"not a judge file written by `ucsj fit` ({type(exc).__name__})", path=str(path)
        ) from None
    if not isinstance(judge, dict) or judge.get("format") != JUDGE_FORMAT:
        raise InputError(f"not a {JUDGE_FORMAT} judge file", path=str(path))
    return judge


def predict_records(
    judge: dict[str, Any], records: list[ScoreRecord], source: str = ""
) -> list[dict[str, Any]]:
    """Predictions for scores made with the judge's criteria and scoring model."""
    meta = judge["meta"]
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
    x = feature_matrix(records, meta["feature_names"], meta["features"])
    probs = judge["estimator"].predict_proba(x)[:, 1] if records else []
    method = f"ucs-{meta['module']}"
    out = []
    for r, p in zip(records, probs, strict=True):
        values = list(r.z.values())
        row = {
            "id": r.id,
            "lang": r.lang,
            "label": r.label,
            "method": method,
            "prob": round(float(p), 6),
            "pred": int(p >= 0.5),
            "unreadable": round(sum(v is None for v in values) / max(len(values), 1), 6),
        }
        if r.error:
            row.update(prob=None, pred=None, error=r.error)
        out.append(row)
    return out


def is_scores_file(path: str | Path) -> bool:
    """True when the first record looks like `ucsj score` output (has `z` and `criteria`)."""
    for _, first in read_json_lines(path):
        return isinstance(first, dict) and "z" in first and "criteria" in first
    return False
