"""Transfer health without target labels: how far a language's criterion answers moved from the
English answers the judge was trained on, and opt-in label-free alignment to them.

`fit` keeps a compact *reference* in the judge file: per criterion and per concept, the
empirical distribution function of the training values on a fixed grid of [0, 1] (overall and,
for a binary task, per English label), their mean and standard deviation, the share of
unreadable answers, and the judge's predicted pass rate on its training data. No sample is kept.

The shift of a criterion is the Wasserstein-1 distance between the language's P(yes)
distribution and the reference's; for values in [0, 1] it is the area between the two
distribution functions, integral |F - G| dx, computed by the midpoint rule on GRID points
(error at most 1/GRID). A language's `shift` is the mean over criteria: 0 when the answers are
distributed as in English, 1 when every answer flipped from certain no to certain yes.

Label shift: a language whose outputs are genuinely better or worse moves too. Under a pure
label shift each criterion's distribution is a mixture pi * F(yes | pass) + (1 - pi) *
F(yes | fail) of the English class-conditional ones, for one pass rate pi shared by every
criterion. `unexplained` is the shift left after the best such mixture (the part a change in
pass rate cannot produce), and `label_free` the shift of the criteria whose English answers
do not depend on the label (separation below MIN_SEPARATION), which label shift does not move.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ucsj.criteria import CriteriaSet
from ucsj.errors import InputError
from ucsj.scores import ScoreRecord
from ucsj.transfer_options import RANDOM_STATE

REFERENCE_FORMAT = "ucsj.reference/1"
GRID = 100  # distribution functions are kept at the midpoints of 100 equal steps of [0, 1]
POINTS = (np.arange(GRID) + 0.5) / GRID
# A language's shift beyond this draws a warning from predict. On the synthetic lenient-judge
# case (bench/bench_shift.py), unshifted languages of 150 samples measure 0.03, a judge that
# turns half of its "no" answers into "yes" 0.135 and one that turns 80% 0.22.
SHIFT_WARNING = 0.10
# One criterion beyond this warns too: a judge can break on one concept only (its mean is then
# diluted by the others). Unshifted languages of 150 samples keep every criterion under 0.07.
CRITERION_WARNING = 0.25
# Chance grows as 1 / sqrt(n): a few samples stray past both thresholds (8 unshifted languages
# of 20 samples: 2 beyond 0.10). A warning also needs the shift beyond these multiples of the
# chance level; the largest of many criteria strays further than their mean.
CHANCE_FACTOR = 2.0
CRITERION_CHANCE_FACTOR = 4.0
MIN_SEPARATION = 0.10  # below this English class separation, a criterion is label-free
NOISE_DRAWS = 20
PRIOR_STEPS = 201  # pass rates tried when fitting the label-shift mixture
TOP_CRITERIA = 3
ALIGNMENTS = ("none", "standardize", "prior")
MIN_ALIGN_SAMPLES = 20


# -- distributions ----------------------------------------------------------------------------


def distribution(values: np.ndarray) -> np.ndarray:
    """Empirical distribution function of each column of `values` (n x F) at POINTS: F x GRID."""
    if len(values) == 0:
        return np.full((values.shape[1], GRID), np.nan)
    ordered = np.sort(values, axis=0)
    return np.stack(
        [
            np.searchsorted(ordered[:, j], POINTS, side="right") / len(values)
            for j in range(values.shape[1])
        ]
    )


def wasserstein(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """W1 between distributions on [0, 1] given as distribution functions at POINTS (last axis)."""
    return np.abs(a - b).mean(axis=-1)


# -- the reference kept by fit ----------------------------------------------------------------


def answer_matrix(
    records: list[ScoreRecord], names: list[str], kind: str
) -> tuple[np.ndarray, np.ndarray]:
    """Values as the judge sees them (unreadable imputed) and the unreadable mask; both responses
    of a pair count as answers."""
    from ucsj.transfer import feature_matrix

    field_name = "s" if kind == "concept" else "z"
    values = [feature_matrix(records, names, kind)]
    missing = [[(getattr(r, field_name) or {}).get(n) is None for n in names] for r in records]
    if any(r.z_b is not None for r in records):
        values.append(feature_matrix(records, names, kind, "b"))
        missing += [
            [(getattr(r, field_name + "_b") or {}).get(n) is None for n in names] for r in records
        ]
    return np.vstack(values), np.asarray(missing, dtype=bool).reshape(-1, len(names))


def build_reference(
    records: list[ScoreRecord],
    criteria: CriteriaSet,
    *,
    labels: np.ndarray | None = None,
    predicted_pass_rate: float | None = None,
) -> dict[str, Any]:
    """The compact description of the training answers that the judge file keeps."""
    reference: dict[str, Any] = {
        "format": REFERENCE_FORMAT,
        "langs": sorted({r.lang for r in records}),
        "grid": GRID,
        "predicted_pass_rate": predicted_pass_rate,
    }
    for kind, names in (
        ("criterion", [q.id for q in criteria.questions]),
        ("concept", [c.id for c in criteria.concepts]),
    ):
        values, missing = answer_matrix(records, names, kind)
        part: dict[str, Any] = {
            "names": names,
            "n": len(values),
            "cdf": distribution(values),
            "mean": values.mean(axis=0),
            "std": values.std(axis=0),
            "unreadable": missing.mean(axis=0),
            "cdf_by_label": {},
        }
        if labels is not None:
            part["cdf_by_label"] = {
                str(v): distribution(values[labels == v]) for v in (0, 1) if (labels == v).any()
            }
        part["noise"] = _noise_coefficient(values, part["cdf"])
        reference[kind] = part
    return reference


def _noise_coefficient(values: np.ndarray, cdf: np.ndarray) -> float:
    """a in: an unshifted sample of m answers shows a shift near a * sqrt(1/m + 1/n) by chance.
    Measured as the mean shift of seeded same-size bootstrap draws times sqrt(n)."""
    rng = np.random.default_rng(RANDOM_STATE)
    n = len(values)
    draws = [
        wasserstein(distribution(values[rng.integers(0, n, n)]), cdf).mean()
        for _ in range(NOISE_DRAWS)
    ]
    return float(np.mean(draws) * math.sqrt(n))


def reference_of(judge: dict[str, Any], purpose: str) -> dict[str, Any]:
    """The judge's reference, or an error saying what is missing and how to get it."""
    reference = judge.get("reference")
    if not isinstance(reference, dict) or reference.get("format") != REFERENCE_FORMAT:
        version = judge.get("meta", {}).get("ucsj_version", "an older ucsj")
        raise InputError(
            f"{purpose} needs the English answer reference that `ucsj fit` keeps in the judge "
            f"file; this judge (fitted by ucsj {version}) has none: refit it with `ucsj fit` "
            "on the same English scores"
        )
    questions = [q["id"] for c in judge["meta"]["criteria"]["concepts"] for q in c["questions"]]
    concepts = [c["id"] for c in judge["meta"]["criteria"]["concepts"]]
    for kind, names in (("criterion", questions), ("concept", concepts)):
        part = reference.get(kind)
        cdfs = [part.get("cdf"), *part.get("cdf_by_label", {}).values()] if part else []
        if (
            not part
            or list(part.get("names", [])) != names
            or any(np.shape(c) != (len(names), GRID) for c in cdfs)
            or any(np.shape(part.get(k)) != (len(names),) for k in ("mean", "std"))
        ):
            raise InputError(
                f"the judge file's answer reference does not match its criteria ({kind} part); "
                "refit it with `ucsj fit`"
            )
    return reference


# -- shift per language ---------------------------------------------------------------------


@dataclass(frozen=True)
class CriterionShift:
    id: str
    text: str
    concept: str
    shift: float
    mean_change: float  # the language's mean answer value minus English's (z: 1 - P(yes)
    # for a question whose yes means bad, so the direction names which way P(yes) went)
    direction: str  # "answers yes more often" / "answers yes less often"
    separation: float | None  # W1 between English pass and fail answers: the label's pull


@dataclass
class LanguageShift:
    lang: str
    n: int
    shift: float
    chance: float  # the shift an unshifted sample of this size shows by chance
    unexplained: float | None  # shift left after the best label-shift mixture
    label_free: float | None  # mean shift of the criteria the English label does not move
    implied_pass_rate: float | None  # the mixture's pass rate
    unreadable: float
    criteria: list[CriterionShift]  # most moved first
    concepts: dict[str, float]
    predicted_pass_rate: float | None = None
    warn: bool = False

    @property
    def top(self) -> list[CriterionShift]:
        return self.criteria[:TOP_CRITERIA]

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["criteria"] = {
            c["id"]: {k: v for k, v in c.items() if k != "id"} for c in data["criteria"]
        }
        data["top"] = [c.id for c in self.top]
        return _clean(data)


@dataclass
class ShiftReport:
    reference: str  # the training languages, e.g. "en"
    reference_pass_rate: float | None
    reference_unreadable: float
    threshold: float
    criteria: list[str]  # criterion ids in the criteria set's order
    languages: dict[str, LanguageShift] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": "ucsj.shift/1",
            "reference": self.reference,
            "measure": "mean over criteria of the Wasserstein-1 distance between the "
            "language's P(yes) distribution and the reference's",
            "threshold": self.threshold,
            "reference_pass_rate": _clean(self.reference_pass_rate),
            "reference_unreadable": self.reference_unreadable,
            "languages": {lang: s.to_json() for lang, s in self.languages.items()},
        }


def _clean(value: Any) -> Any:
    """NaN (an undefined figure) becomes null, never a number."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def language_shifts(
    reference: dict[str, Any], criteria: CriteriaSet, records: list[ScoreRecord]
) -> ShiftReport:
    """The shift of every language among `records` (answers of failed samples left out)."""
    part = reference["criterion"]
    report = ShiftReport(
        reference="+".join(reference["langs"]),
        reference_pass_rate=reference.get("predicted_pass_rate"),
        reference_unreadable=round(float(np.mean(part["unreadable"])), 6),
        threshold=SHIFT_WARNING,
        criteria=list(part["names"]),
    )
    groups: dict[str, list[ScoreRecord]] = defaultdict(list)
    for r in records:
        if r.error is None:
            groups[r.lang].append(r)
    for lang, group in sorted(groups.items()):
        report.languages[lang] = _one_language(reference, criteria, lang, group)
    return report


def _one_language(
    reference: dict[str, Any], criteria: CriteriaSet, lang: str, records: list[ScoreRecord]
) -> LanguageShift:
    part = reference["criterion"]
    names = list(part["names"])
    questions = {q.id: q for q in criteria.questions}
    concept_of = {q.id: c.id for c in criteria.concepts for q in c.questions}
    values, missing = answer_matrix(records, names, "criterion")
    cdf = distribution(values)
    per_criterion = wasserstein(cdf, part["cdf"])
    change = values.mean(axis=0) - part["mean"]
    by_label = part["cdf_by_label"]
    separation = wasserstein(by_label["1"], by_label["0"]) if len(by_label) == 2 else None
    unexplained = label_free = implied = None
    if separation is not None:
        implied, residual = _label_shift_fit(cdf, by_label["0"], by_label["1"])
        unexplained = round(float(residual.mean()), 6)
        flat = separation < MIN_SEPARATION
        if flat.any():
            label_free = round(float(per_criterion[flat].mean()), 6)
    items = []
    for j, qid in enumerate(names):
        yes_up = (change[j] > 0) != (questions[qid].yes_means == "bad")  # z = 1 - P(yes) then
        items.append(
            CriterionShift(
                qid,
                questions[qid].text,
                concept_of[qid],
                round(float(per_criterion[j]), 6),
                round(float(change[j]), 6),
                "answers yes more often" if yes_up else "answers yes less often",
                None if separation is None else round(float(separation[j]), 6),
            )
        )
    items.sort(key=lambda c: (-c.shift, c.id))
    concept_part = reference["concept"]
    concept_values, _ = answer_matrix(records, list(concept_part["names"]), "concept")
    concept_shift = wasserstein(distribution(concept_values), concept_part["cdf"])
    shift = round(float(per_criterion.mean()), 6)
    chance = chance_shift(part, len(values))
    return LanguageShift(
        lang=lang,
        n=len(records),
        shift=shift,
        chance=round(chance, 6),
        unexplained=unexplained,
        label_free=label_free,
        implied_pass_rate=implied,
        unreadable=round(float(missing.mean()), 6),
        criteria=items,
        concepts={
            cid: round(float(v), 6)
            for cid, v in zip(concept_part["names"], concept_shift, strict=True)
        },
        warn=_beyond(shift, items[0].shift, chance),
    )


def _beyond(shift: float, top: float, chance: float) -> bool:
    return (shift > SHIFT_WARNING and shift > CHANCE_FACTOR * chance) or (
        top > CRITERION_WARNING and top > CRITERION_CHANCE_FACTOR * chance
    )


def chance_shift(part: dict[str, Any], m: int) -> float:
    """The shift a sample of m answers from the reference's own distribution shows by chance."""
    return float(part["noise"] * math.sqrt(1 / max(m, 1) + 1 / part["n"]))


def _label_shift_fit(
    cdf: np.ndarray, fail: np.ndarray, passing: np.ndarray
) -> tuple[float, np.ndarray]:
    """The pass rate whose mixture of the English class distributions lies nearest to the
    language's answers (mean W1 over criteria), and each criterion's distance to it."""
    rates = np.linspace(0, 1, PRIOR_STEPS)
    mixtures = rates[:, None, None] * passing + (1 - rates[:, None, None]) * fail
    distances = wasserstein(cdf[None], mixtures)  # rates x criteria
    best = int(np.argmin(distances.mean(axis=1)))
    return round(float(rates[best]), 6), distances[best]


def shift_report(
    judge: dict[str, Any], records: list[ScoreRecord], source: str = ""
) -> ShiftReport:
    """Shift per language with the judge's predicted pass rate beside it (binary judges)."""
    from ucsj.criteria import criteria_from_json
    from ucsj.transfer import predict_records

    reference = reference_of(judge, "the shift check")
    criteria = criteria_from_json(judge["meta"]["criteria"], source)
    rows = predict_records(judge, records, source)  # refuses other criteria or scoring models
    report = language_shifts(reference, criteria, records)
    if judge["meta"].get("target", "label") == "label":
        predicted: dict[str, list[int]] = defaultdict(list)
        for row in rows:
            if row.get("pred") is not None:
                predicted[row["lang"]].append(row["pred"])
        for lang, shift in report.languages.items():
            if predicted[lang]:
                shift.predicted_pass_rate = round(float(np.mean(predicted[lang])), 6)
    return report


def warning_lines(report: ShiftReport) -> list[str]:
    """One line per language whose shift is beyond SHIFT_WARNING (or one of whose criteria is
    beyond CRITERION_WARNING) and beyond chance, naming its most moved criteria."""
    lines = []
    for lang, s in report.languages.items():
        if not s.warn:
            continue
        top = "; ".join(f'{c.id} "{c.text}" {c.direction} ({c.mean_change:+.2f})' for c in s.top)
        label_shift = (
            ""
            if s.unexplained is None
            else f"; {s.unexplained:.3f} of it not explained by a different pass rate"
        )
        beyond = (
            f"shift {s.shift:.3f} > {SHIFT_WARNING}"
            if s.shift > SHIFT_WARNING
            else f"shift {s.shift:.3f}, but {s.top[0].id} {s.top[0].shift:.3f} > "
            f"{CRITERION_WARNING}"
        )
        unreadable = (
            f" Unreadable answers: {s.unreadable:.3f} ({report.reference} "
            f"{report.reference_unreadable:.3f})."
            if s.unreadable > report.reference_unreadable + 0.05
            else ""
        )
        lines.append(
            f"warning: {lang}: criterion answers moved from the {report.reference} reference "
            f"({beyond}; chance {s.chance:.3f}, n={s.n}{label_shift}): the judge may not "
            f"carry over. Most moved: {top}.{unreadable} See `ucsj analyze shift`."
        )
    return lines


# -- label-free alignment (predict --align) -------------------------------------------------


def check_alignment(judge: dict[str, Any], align: str) -> None:
    if align not in ALIGNMENTS:
        raise InputError(f"--align must be one of {', '.join(ALIGNMENTS)}")
    if align == "none":
        return
    reference_of(judge, f"--align {align}")
    target = judge["meta"].get("target", "label")
    if target == "preference" or (align == "prior" and target != "label"):
        raise InputError(
            f"--align {align} works on judges that predict a label"
            + (" or a score" if align == "standardize" else "")
            + f"; this one predicts a {target}"
        )


def language_groups(records: list[ScoreRecord]) -> dict[str, np.ndarray]:
    """Row indices per language of the successfully scored records, each large enough to
    estimate the language's own distribution from."""
    groups: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(records):
        if r.error is None:
            groups[r.lang].append(i)
    for lang, rows in groups.items():
        if len(rows) < MIN_ALIGN_SAMPLES:
            raise InputError(
                f"--align estimates each language's answer distribution from its own samples: "
                f"'{lang}' has {len(rows)}, at least {MIN_ALIGN_SAMPLES} are needed"
            )
    return {lang: np.asarray(rows) for lang, rows in sorted(groups.items())}


def standardize(
    x: np.ndarray, groups: dict[str, np.ndarray], mean: np.ndarray, std: np.ndarray
) -> np.ndarray:
    """Each language's features moved to the reference's mean and standard deviation, column by
    column (a constant column is only moved)."""
    out = x.copy()
    for rows in groups.values():
        part = x[rows]
        own_mean, own_std = part.mean(axis=0), part.std(axis=0)
        scale = np.where(own_std > 0, std / np.where(own_std > 0, own_std, 1.0), 1.0)
        out[rows] = (part - own_mean) * scale + mean
    return out


def match_prior(probs: np.ndarray, groups: dict[str, np.ndarray], pass_rate: float) -> np.ndarray:
    """Each language's probabilities shifted on the logit scale so that the share at or above
    0.5 is the reference's predicted pass rate (the order of the samples is kept)."""
    out = probs.copy()
    for rows in groups.values():
        p = np.clip(probs[rows], 1e-12, 1 - 1e-12)
        ordered = np.sort(p)[::-1]
        k = round(pass_rate * len(p))
        if k <= 0:
            threshold = min(1 - 1e-12, ordered[0] + 1e-12)
        elif k >= len(p):
            threshold = ordered[-1]
        else:
            threshold = (ordered[k - 1] + ordered[k]) / 2
        offset = np.log(threshold / (1 - threshold))
        out[rows] = 1 / (1 + np.exp(-(np.log(p / (1 - p)) - offset)))
    return out


def prior_misses(
    rows: list[dict[str, Any]], pass_rate: float, tolerance: float = 0.05
) -> list[str]:
    """Languages whose predicted pass rate after --align prior is still off the reference's:
    probabilities tied across the threshold (tree modules, knn) pass or fail together."""
    predicted: dict[str, list[int]] = defaultdict(list)
    for row in rows:
        if row.get("pred") is not None:
            predicted[row["lang"]].append(row["pred"])
    lines = []
    for lang, preds in sorted(predicted.items()):
        rate = float(np.mean(preds))
        if abs(rate - pass_rate) > tolerance:
            lines.append(
                f"warning: {lang}: --align prior reached a predicted pass rate of {rate:.3f}, "
                f"not the reference's {pass_rate:.3f}: the module's probabilities are tied "
                "across the threshold (tree modules and knn give few distinct values)"
            )
    return lines
