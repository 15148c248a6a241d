"""The transfer module's choice (repeated cross-validation, one-standard-error rule), its one
decision rule, seeds, and what fit and predict accept."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import ucsj

from ucsj.criteria import build_criteria
from ucsj.judge_file import load_judge, save_judge
from ucsj.scores import ScoreRecord
from ucsj.transfer import (
    CV_FOLDS,
    CV_REPEATS,
    SIMPLEST_FIRST,
    choose_module,
    fit_judge,
    predict_records,
)

CRITERIA = build_criteria(
    "rag-faithfulness",
    [("Attribution", "claims are supported", ["Is it supported?"]), ("Style", "tone", ["Ok?"])],
    {},
)


def record(i, lang, label, c1, c2, scoring="per-concept", model="m-2024-01-01"):
    return ScoreRecord(
        f"{lang}-{i}",
        lang,
        label,
        {"c1.q1": c1, "c2.q1": c2},
        {"c1": c1, "c2": c2},
        CRITERIA.fingerprint,
        model,
        scoring,
        None,
    )


def separable(n=60, lang="en", **kwargs):
    rng = np.random.default_rng(0)
    out = []
    for i in range(n):
        label = i % 2
        c1 = float(np.clip((0.8 if label else 0.2) + rng.normal(0, 0.05), 0, 1))
        out.append(record(i, lang, label, c1, float(rng.uniform()), **kwargs))
    return out


def test_auto_takes_the_simplest_module_within_one_standard_error():
    # every module separates these perfectly: a single split picked the first listed (mlp)
    judge = fit_judge(separable(), CRITERIA)
    meta = judge["meta"]
    assert meta["module"] == "logreg"
    assert meta["validation_folds"] == CV_FOLDS * CV_REPEATS
    assert set(meta["validation"]) == set(SIMPLEST_FIRST)
    assert all(meta["validation"][m] == 1.0 for m in SIMPLEST_FIRST)
    assert "logreg" in meta["selection"]


def test_the_one_standard_error_rule_is_applied_to_the_cross_validated_means():
    # XOR: a linear module cannot learn it, neighbours and trees can
    rng = np.random.default_rng(1)
    x = rng.uniform(size=(80, 2))
    y = ((x[:, 0] > 0.5) ^ (x[:, 1] > 0.5)).astype(int)
    choice = choose_module(x, y)
    assert choice.folds == 15
    best = max(choice.table, key=choice.table.get)
    threshold = choice.table[best] - choice.sd[best] / math.sqrt(15)
    expected = next(m for m in SIMPLEST_FIRST if choice.table[m] >= threshold)
    assert choice.module == expected != "logreg"
    assert choice.table["logreg"] < 0.7 < choice.table[choice.module]
    assert all(sd > 0 or choice.table[m] in (0.0, 1.0) for m, sd in choice.sd.items())


def test_fit_prints_mean_and_sd_per_module_and_says_why(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    CRITERIA.save("criteria.json")
    scores = tmp_path / "en.scores.jsonl"
    write_scores(scores, separable())
    assert ucsj("fit", "--train", str(scores)) == 0  # criteria.json read by default
    captured = capsys.readouterr()
    assert "5 folds x 3 repeats" in captured.out and "sd" in captured.out
    (row,) = [line for line in captured.out.splitlines() if "logreg" in line]
    assert "<- chosen" in row
    assert "within one standard error" in captured.err or "best mean" in captured.err
    assert (tmp_path / "judge.skops").exists()


def test_fit_names_the_training_languages_in_its_heading(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    CRITERIA.save("criteria.json")
    scores = tmp_path / "fr.scores.jsonl"
    write_scores(scores, separable(lang="fr"))
    assert ucsj("fit", "--train", str(scores), "-o", "fr.skops") == 0
    out = capsys.readouterr().out
    assert "English" not in out
    assert "Cross-validation on fr (5 folds x 3 repeats, seeded)" in " ".join(out.split())


def write_scores(path, records):
    with path.open("w") as out:
        for r in records:
            out.write(
                json.dumps(
                    {
                        "id": r.id,
                        "lang": r.lang,
                        "label": r.label,
                        "criteria": r.criteria,
                        "model": r.model,
                        "scoring": r.scoring,
                        "z": r.z,
                        "s": r.s,
                    }
                )
                + "\n"
            )


def test_fit_says_which_criteria_file_is_meant_when_the_fingerprints_differ(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    other = build_criteria("rag-faithfulness", [("Other", "x", ["Other?"])], {})
    other.save("criteria.json")
    write_scores(tmp_path / "en.scores.jsonl", separable())
    assert ucsj("fit", "--train", "en.scores.jsonl") == 2
    err = capsys.readouterr().err
    assert "criteria.json" in err and "read by default" in err
    assert CRITERIA.fingerprint[:19] in err and other.fingerprint[:19] in err


def imbalanced(n=120):
    rng = np.random.default_rng(3)
    out = []
    for i in range(n):
        label = int(rng.uniform() < 0.3)
        c1 = float(np.clip(0.45 + 0.15 * label + rng.normal(0, 0.2), 0, 1))
        out.append(record(i, "en", label, c1, float(rng.uniform())))
    return out


def test_predict_uses_the_modules_own_decision_rule():
    train = imbalanced()
    judge = fit_judge(train, CRITERIA, module="svm")
    rows = predict_records(judge, train)
    estimator = judge["estimator"]
    x = np.asarray([[r.s["c1"], r.s["c2"]] for r in train])
    assert [row["pred"] for row in rows] == list(estimator.predict(x))
    # the calibrated probability stays as it is, and thresholding it would disagree
    assert [row["prob"] for row in rows] == [round(p, 6) for p in estimator.predict_proba(x)[:, 1]]
    assert any((row["prob"] >= 0.5) != row["pred"] for row in rows)


def test_seeds_average_the_probability_and_report_the_spread(tmp_path):
    train = imbalanced()
    judge = fit_judge(train, CRITERIA, module="mlp", seeds=3)
    assert judge["meta"]["seeds"] == 3
    assert [m.random_state for m in judge["estimators"]] == [42, 43, 44]
    save_judge(judge, tmp_path / "j.skops")
    loaded = load_judge(tmp_path / "j.skops")
    assert len(loaded["estimators"]) == 3
    rows = predict_records(loaded, train)
    x = np.asarray([[r.s["c1"], r.s["c2"]] for r in train])
    probs = np.asarray([m.predict_proba(x)[:, 1] for m in judge["estimators"]])
    assert [row["prob"] for row in rows] == [round(float(p), 6) for p in probs.mean(axis=0)]
    assert [row["prob_sd"] for row in rows] == [round(float(s), 6) for s in probs.std(axis=0)]
    assert max(row["prob_sd"] for row in rows) > 0
    # one seed: the rows are as they always were
    single = predict_records(fit_judge(train, CRITERIA, module="mlp"), train)
    assert "prob_sd" not in single[0]


def test_fit_seeds_option(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    CRITERIA.save("criteria.json")
    write_scores(tmp_path / "en.jsonl", separable())
    assert ucsj("fit", "--train", "en.jsonl", "--module", "logreg", "--seeds", "2") == 0
    assert len(load_judge(tmp_path / "judge.skops")["estimators"]) == 2


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [("scoring", "per-criterion", "per-concept"), ("model", "other-2024-02-02", "m-2024-01-01")],
)
def test_predict_refuses_scores_of_another_granularity_or_model(field, value, expected):
    judge = fit_judge(separable(), CRITERIA, module="logreg")
    other = separable(10, "fr", **{field: value})
    with pytest.raises(Exception) as error:
        predict_records(judge, other, source="fr.scores.jsonl")
    message = str(error.value)
    assert getattr(error.value, "exit_code", None) == 2
    assert value in message and expected in message and "fr.scores.jsonl" in message


def test_scores_and_preferences_are_chosen_by_the_same_cross_validation():
    rng = np.random.default_rng(5)
    x = rng.uniform(size=(60, 3))
    scores = np.clip(np.rint(1 + 6 * x[:, 0] + rng.normal(0, 0.7, 60)), 1, 7).astype(int)
    choice = choose_module(x, scores, "score", repeats=1)  # one repeat keeps the test short
    assert choice.folds == 5 and choice.table[choice.module] > 0.5
    assert choice.module in SIMPLEST_FIRST and choice.reason
    # preferences: rows are pairs then their swapped copies; folds split the pairs
    d = rng.normal(size=(40, 3))
    first_better = (d[:, 0] > 0).astype(int)
    doubled_x, doubled_y = np.vstack([d, -d]), np.concatenate([first_better, 1 - first_better])
    choice = choose_module(doubled_x, doubled_y, "preference", repeats=1)
    assert choice.folds == 5 and choice.table[choice.module] > 0.9
    best = max(choice.table, key=choice.table.get)
    threshold = choice.table[best] - choice.sd[best] / math.sqrt(5)
    assert choice.module == next(m for m in SIMPLEST_FIRST if choice.table[m] >= threshold)


def test_judges_written_before_seeds_still_predict():
    judge = fit_judge(separable(), CRITERIA, module="logreg")
    old = {"format": judge["format"], "estimator": judge["estimator"], "meta": judge["meta"]}
    for key in ("seeds", "validation_sd", "validation_folds", "selection"):
        old["meta"].pop(key)
    assert predict_records(old, separable(10, "fr")) == predict_records(judge, separable(10, "fr"))
