"""The section 5 analyses on data where the answer is known."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from conftest import ucsj
from sklearn.linear_model import LogisticRegression

from ucsj.analysis import criteria_importance, module_comparison, sample_efficiency
from ucsj.criteria import build_criteria
from ucsj.metrics import balanced_accuracy

CRITERIA = build_criteria(
    "rag-faithfulness",
    [
        ("Attribution", "", ["Is every claim supported?", "Is the year right?"]),
        ("Fluency", "", ["Is it fluent?", "Is it well formed?"]),
        ("Style", "", ["Is the tone right?", "Is it concise?"]),
    ],
    {},
)
SIGNAL = "c1.q1"  # carries the label in every language; everything else is noise


def make_scores(path, lang, n, seed, noise=0.15):
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        label = int(i % 2 == 0)
        z = {q.id: round(rng.random(), 4) for q in CRITERIA.questions}
        z[SIGNAL] = round(min(1, max(0, (0.8 if label else 0.2) + rng.uniform(-noise, noise))), 4)
        s = {
            c.id: round(sum(z[q.id] for q in c.questions) / len(c.questions), 6)
            for c in CRITERIA.concepts
        }
        rows.append(
            {
                "id": f"{lang}-{i}",
                "lang": lang,
                "label": label,
                "z": z,
                "s": s,
                "criteria": CRITERIA.fingerprint,
                "model": "m",
                "scoring": "per-concept",
                "answers": {},
                "usage": {"calls": 3, "prompt_tokens": 300, "completion_tokens": 9},
            }
        )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("analysis")
    CRITERIA.save(root / "criteria.json")
    out = {"en": make_scores(root / "en.jsonl", "en", 120, 1)}
    for seed, lang in enumerate(("fr", "de"), start=2):
        out[lang] = make_scores(root / f"{lang}.jsonl", lang, 80, seed)
    return root, out


def _records(files):
    from ucsj.scores import read_scores

    return {lang: read_scores(path) for lang, path in files.items()}


def _png(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000, path
    import matplotlib.image

    assert matplotlib.image.imread(path).ndim == 3


def test_signal_criterion_ranks_first_everywhere(files):
    _, paths = files
    recs = _records(paths)
    result = criteria_importance(recs["en"] + recs["fr"] + recs["de"], CRITERIA)
    for lang, profile in result.profiles.items():
        assert result.criteria[int(np.argmax(profile))] == SIGNAL, lang
        assert result.spearman[lang] == pytest.approx(
            __import__("scipy.stats").stats.spearmanr(result.profiles["en"], profile).statistic
        )
    assert result.top[0] == SIGNAL and len(result.top) == 6  # fewer than 10 criteria: all
    assert all(result.ba_all[lang] > 0.9 for lang in result.profiles)


def test_module_average_matches_a_direct_computation(files):
    _, paths = files
    recs = _records(paths)
    table = module_comparison(recs["en"], recs["fr"] + recs["de"], CRITERIA)

    def matrix(records):
        return np.asarray([[r.s[c.id] for c in CRITERIA.concepts] for r in records])

    direct = LogisticRegression(C=0.1, max_iter=2000, class_weight="balanced", random_state=42)
    direct.fit(matrix(recs["en"]), [r.label for r in recs["en"]])
    per_lang = [
        balanced_accuracy([r.label for r in recs[lang]], direct.predict(matrix(recs[lang])))
        for lang in ("de", "fr")
    ]
    assert table["logreg"]["avg"] == pytest.approx(np.mean(per_lang))
    assert set(table) == {"mlp", "logreg", "svm", "rf", "gb", "knn"}


def test_sample_efficiency_covers_every_share_and_language(files):
    _, paths = files
    recs = _records(paths)
    points = sample_efficiency(
        recs["en"], recs["fr"] + recs["de"], CRITERIA, module="logreg", seeds=3
    )
    keys = {(p.fraction, p.lang) for p in points}
    assert {lang for _, lang in keys} == {"en (test)", "fr", "de"}
    assert {f for f, _ in keys} == {0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0}
    full = [p for p in points if p.fraction == 1.0]
    assert all(p.mean > 0.7 and p.runs == 1 for p in full), "all the data: a single fit"
    assert all(p.runs == 3 for p in points if p.fraction < 1.0)


def test_analyze_commands_write_tables_json_and_pngs(files, tmp_path, capsys):
    root, paths = files
    common = ["--criteria", str(root / "criteria.json")]
    targets = ["--targets", str(paths["fr"]), "--targets", str(paths["de"])]
    assert (
        ucsj(
            "analyze",
            "sample-efficiency",
            "--train",
            str(paths["en"]),
            *targets,
            *common,
            "--seeds",
            "2",
            "--json",
            str(tmp_path / "se.json"),
            "--plot",
            str(tmp_path / "se.png"),
        )
        == 0
    )
    assert (
        ucsj(
            "analyze",
            "importance",
            *map(str, paths.values()),
            *common,
            "--json",
            str(tmp_path / "imp.json"),
            "--plot",
            str(tmp_path / "imp.png"),
            "--heatmap",
            str(tmp_path / "heat.png"),
        )
        == 0
    )
    assert (
        ucsj(
            "analyze",
            "modules",
            "--train",
            str(paths["en"]),
            *targets,
            *common,
            "--json",
            str(tmp_path / "mod.json"),
            "--plot",
            str(tmp_path / "mod.png"),
        )
        == 0
    )
    spec = f"per-concept={root / 'criteria.json'},{paths['en']},{paths['fr']},{paths['de']}"
    assert (
        ucsj(
            "analyze",
            "decomposition",
            "--run",
            spec,
            "--json",
            str(tmp_path / "dec.json"),
            "--plot",
            str(tmp_path / "dec.png"),
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "Balanced accuracy by transfer module" in out and "Decomposition" in out
    for name in ("se", "imp", "heat", "mod", "dec"):
        _png(tmp_path / f"{name}.png")
    dec = json.loads((tmp_path / "dec.json").read_text())["per-concept"]
    assert dec["calls_per_sample"] == 3 and dec["prompt_tokens_per_sample"] == 300
    assert json.loads((tmp_path / "imp.json").read_text())["top"][0] == SIGNAL


def test_aggregator_analysis_and_html_with_plots(files, tmp_path):
    root, paths = files
    llm = tmp_path / "llm.jsonl"
    rows = [json.loads(x) for x in paths["fr"].read_text().splitlines()]
    llm.write_text(
        "".join(
            json.dumps(
                {
                    "id": r["id"],
                    "lang": "fr",
                    "label": r["label"],
                    "method": "llm-aggregator",
                    "prob": None,
                    "pred": 1,
                }
            )
            + "\n"
            for r in rows
        )
    )
    assert (
        ucsj(
            "analyze",
            "aggregator",
            "--train",
            str(paths["en"]),
            "--targets",
            str(paths["fr"]),
            "--criteria",
            str(root / "criteria.json"),
            "--llm",
            str(llm),
            "--json",
            str(tmp_path / "agg.json"),
            "--plot",
            str(tmp_path / "agg.png"),
        )
        == 0
    )
    agg = json.loads((tmp_path / "agg.json").read_text())
    assert agg["llm"]["fr"] == 0.5, "always 'pass' is chance"
    assert agg["trained"]["fr"] > 0.8
    _png(tmp_path / "agg.png")
    assert (
        ucsj(
            "report",
            str(llm),
            "--html",
            str(tmp_path / "r.html"),
            "--figure",
            str(tmp_path / "agg.png"),
        )
        == 0
    )
    page = (tmp_path / "r.html").read_text()
    assert page.count("data:image/png;base64,") == 1 and "http" not in page.split("<body>")[1]


def test_keeping_every_criterion_changes_no_ba(tmp_path):
    # 6 criteria, fewer than the top 10: the "top" set is all of them, so the BA cannot move
    # (the forest depends on column order: the kept columns stay in their original order)
    paths = {
        lang: make_scores(tmp_path / f"{lang}.jsonl", lang, 60, seed, noise=0.6)
        for seed, lang in enumerate(("en", "fr", "hi"), start=7)
    }
    recs = _records(paths)
    result = criteria_importance(recs["en"] + recs["fr"] + recs["hi"], CRITERIA)
    assert sorted(result.top) == sorted(q.id for q in CRITERIA.questions)
    assert result.top[0] == SIGNAL  # still listed by importance
    for lang in paths:
        assert result.ba_top[lang] == result.ba_all[lang], lang
