"""The report's statistics: the average over languages, undefined metrics, missing scores,
duplicate and colliding inputs, ties. Each value is worked out by hand here."""

from __future__ import annotations

import json

import pytest
from conftest import ucsj

from ucsj.metrics import kendall_tau


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def binary_rows(method, lang, labels, preds, start=0):
    return [
        {"id": f"{lang}-{start + i}", "lang": lang, "label": t, "method": method, "pred": p}
        for i, (t, p) in enumerate(zip(labels, preds, strict=True))
    ]


def report_json(tmp_path, *paths, gates=()):
    out = tmp_path / "report.json"
    args = [str(p) for p in paths]
    for gate in gates:
        args += ["--gate", gate]
    code = ucsj("report", *args, "--json", str(out))
    return code, (json.loads(out.read_text()) if out.exists() else None)


@pytest.fixture
def two_languages(tmp_path):
    # fr: 4 samples, BA 1.0; de: 12 samples, BA 0.5 (every sample predicted pass, both classes)
    fr = binary_rows("m", "fr", [1, 1, 0, 0], [1, 1, 0, 0])
    de = binary_rows("m", "de", [1] * 6 + [0] * 6, [1] * 12)
    return write(tmp_path / "p.jsonl", fr + de)


def test_avg_is_the_unweighted_mean_over_languages_and_all_stays_pooled(two_languages, tmp_path):
    code, report = report_json(tmp_path, two_languages)
    assert code == 0
    m = report["methods"]["m"]
    assert m["fr"]["ba"] == 1.0 and m["de"]["ba"] == 0.5
    assert m["avg"]["ba"] == pytest.approx(0.75)
    # pooled: 8 positives all right, 8 negatives of which 2 right -> (1 + 0.25) / 2
    assert m["all"]["ba"] == pytest.approx(0.625)
    assert m["avg"]["n"] == 16 and m["avg"]["languages"] == ["de", "fr"]
    assert m["avg"]["ba_low"] <= 0.75 <= m["avg"]["ba_high"]
    assert report["best"]["avg"] == ["m"]


def test_gates_accept_avg(two_languages):
    assert ucsj("report", str(two_languages), "--gate", "ba[avg]>=0.75") == 0
    assert ucsj("report", str(two_languages), "--gate", "ba[avg]>=0.76") == 1
    assert ucsj("report", str(two_languages), "--gate", "acc[avg]>=0.75") == 0


def test_avg_in_junit_html_and_console(two_languages, tmp_path, capsys):
    junit, page = tmp_path / "j.xml", tmp_path / "r.html"
    assert ucsj("report", str(two_languages), "--junit", str(junit), "--html", str(page)) == 0
    assert 'name="avg: n=16 ba=0.7500"' in junit.read_text()
    assert "<th>avg</th>" in page.read_text()
    out = capsys.readouterr().out
    assert "avg" in out and "0.750" in out


def test_best_is_marked_on_avg_and_every_tied_method_gets_the_mark(tmp_path, capsys):
    labels = [1, 1, 0, 0]
    a = write(tmp_path / "a.jsonl", binary_rows("a", "fr", labels, [1, 1, 0, 0]))
    b = write(tmp_path / "b.jsonl", binary_rows("b", "fr", labels, [1, 1, 0, 0]))
    c = write(tmp_path / "c.jsonl", binary_rows("c", "fr", labels, [1, 1, 1, 1]))
    code, report = report_json(tmp_path, a, b, c)
    assert code == 0
    assert report["best"] == {"fr": ["a", "b"], "avg": ["a", "b"], "all": ["a", "b"]}
    capsys.readouterr()
    ucsj("report", str(a), str(b), str(c))
    out = capsys.readouterr().out
    rows = {
        line.split()[1]: line
        for line in out.splitlines()
        if line.split()[1:2] in (["a"], ["b"], ["c"])
    }
    assert "1.000*" in rows["a"] and "1.000*" in rows["b"] and "*" not in rows["c"]


def test_one_class_gold_makes_ba_undefined_and_a_gate_on_it_fails_with_the_reason(tmp_path, capsys):
    # every gold label is pass and the file predicts pass for all: not a BA of 1.0
    path = write(tmp_path / "p.jsonl", binary_rows("m", "fr", [1] * 20, [1] * 19 + [0]))
    code, report = report_json(tmp_path, path)
    assert code == 0
    fr = report["methods"]["m"]["fr"]
    assert fr["ba"] is None and fr["tnr"] is None and fr["tpr"] == 0.95
    assert "one class" in fr["undefined"]["ba"]
    assert report["methods"]["m"]["avg"]["ba"] is None
    capsys.readouterr()
    assert ucsj("report", str(path), "--gate", "ba>=0.8") == 1
    captured = capsys.readouterr()
    assert "n/a" in captured.out and "0.950 [" not in captured.out
    assert "ba is undefined" in captured.err and "one class" in captured.err
    code, gated = report_json(tmp_path, path, gates=["ba[avg]>=0.8"])
    assert code == 1 and gated["gates"][0]["value"] is None
    assert "one class" in gated["gates"][0]["undefined"] and not gated["gates"][0]["passed"]
    assert ucsj("report", str(path), "--gate", "acc>=0.9") == 0  # acc is defined


def test_avg_is_undefined_when_a_method_lacks_a_language(tmp_path):
    a = write(
        tmp_path / "a.jsonl",
        binary_rows("a", "fr", [1, 0], [1, 0]) + binary_rows("a", "de", [1, 0], [1, 0]),
    )
    b = write(tmp_path / "b.jsonl", binary_rows("b", "fr", [1, 0], [1, 0]))
    code, report = report_json(tmp_path, a, b)
    assert code == 0
    assert report["methods"]["a"]["avg"]["ba"] == 1.0
    assert report["methods"]["b"]["avg"]["ba"] is None
    assert "de" in report["methods"]["b"]["avg"]["undefined"]["ba"]
    assert report["best"]["avg"] == ["a"]


def pointwise_rows(method, lang, gold, preds):
    return [
        {"id": f"{lang}-{i}", "lang": lang, "score": g, "method": method, "pred": p}
        for i, (g, p) in enumerate(zip(gold, preds, strict=True))
    ]


def test_pointwise_tau_counts_missing_scores_as_wrong(tmp_path):
    gold = [1, 2, 3, 4, 5, 6, 7, 1, 4, 7]
    preds = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, None, None, None, None]  # 40% missing
    path = write(tmp_path / "p.jsonl", pointwise_rows("m", "de", gold, preds))
    code, report = report_json(tmp_path, path)
    assert code == 0
    de = report["methods"]["m"]["de"]
    assert de["tau_scored"] == pytest.approx(1.0)  # the scored ones alone look perfect
    assert de["error_rate"] == pytest.approx(0.4)
    # gold 7 and 4 sit in the upper half of 1..7 -> lowest; gold 1 -> highest
    imputed = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 0.0, 8.0, 0.0, 0.0]
    assert de["tau"] == pytest.approx(kendall_tau(gold, imputed))
    assert de["tau"] < 0.5
    assert ucsj("report", str(path), "--gate", "tau>=0.5") == 1
    assert ucsj("report", str(path), "--gate", "tau_scored>=0.99") == 0
    assert ucsj("report", str(path), "--gate", "error_rate<=0.3") == 1


def test_duplicate_ids_within_a_method_are_an_input_error(tmp_path, capsys):
    rows = binary_rows("m", "fr", [1, 0, 1], [1, 0, 1])
    rows[2]["id"] = rows[0]["id"]
    path = write(tmp_path / "p.jsonl", rows)
    assert ucsj("report", str(path)) == 2
    err = capsys.readouterr().err
    assert f"{path}:3" in err and "fr-0" in err and "line 1" in err


def test_the_same_file_twice_is_refused(two_languages, capsys):
    assert ucsj("report", str(two_languages), str(two_languages)) == 2
    assert "twice" in capsys.readouterr().err


def test_colliding_method_names_are_told_apart_by_file_name(tmp_path):
    labels = [1, 1, 0, 0]
    plain = write(
        tmp_path / "fr.rocket.jsonl", binary_rows("rocketeval", "fr", labels, [1, 1, 1, 0])
    )
    calibrated = write(
        tmp_path / "fr.rocket-cal.jsonl", binary_rows("rocketeval", "fr", labels, [1, 1, 0, 0])
    )
    code, report = report_json(tmp_path, plain, calibrated)
    assert code == 0
    methods = report["methods"]
    assert set(methods) == {"rocketeval (fr.rocket.jsonl)", "rocketeval (fr.rocket-cal.jsonl)"}
    assert methods["rocketeval (fr.rocket.jsonl)"]["fr"]["n"] == 4
    assert methods["rocketeval (fr.rocket-cal.jsonl)"]["fr"]["ba"] == 1.0


def test_one_method_split_over_language_files_is_still_one_method(tmp_path):
    fr = write(tmp_path / "fr.jsonl", binary_rows("m", "fr", [1, 0], [1, 0]))
    de = write(tmp_path / "de.jsonl", binary_rows("m", "de", [1, 0], [0, 0]))
    code, report = report_json(tmp_path, fr, de)
    assert code == 0 and list(report["methods"]) == ["m"]
    assert report["methods"]["m"]["avg"]["ba"] == pytest.approx(0.75)


def test_a_gate_on_an_undefined_shift_fails_with_its_reason():
    from types import SimpleNamespace

    from ucsj.report import _shift_gate, parse_gate

    shift = SimpleNamespace(languages={"hi": SimpleNamespace(shift=float("nan"))})
    report = SimpleNamespace(shift=shift, shift_source="judge.skops")
    (result,) = _shift_gate(report, parse_gate("shift<=0.15"))
    assert not result.passed
    assert result.undefined and "undefined" in result.line()


def test_a_gate_without_group_checks_each_method_on_the_languages_it_has(tmp_path, capsys):
    # methods by languages: "m" on fr and de, the baseline "b" on fr only
    m = write(
        tmp_path / "m.jsonl",
        binary_rows("m", "fr", [1, 0], [1, 0]) + binary_rows("m", "de", [1, 0], [1, 1]),
    )
    b = write(tmp_path / "b.jsonl", binary_rows("b", "fr", [1, 0], [1, 1]))
    code, report = report_json(tmp_path, m, b, gates=["acc>=0.1"])
    assert code == 0
    checked = sorted((g["method"], g["group"]) for g in report["gates"])
    assert checked == [("b", "fr"), ("m", "de"), ("m", "fr")]
    # a group named explicitly that one method lacks: undefined there, so the gate fails
    code, report = report_json(tmp_path, m, b, gates=["acc[de]>=0.1"])
    assert code == 1
    (lacking,) = [g for g in report["gates"] if g["method"] == "b"]
    assert not lacking["passed"] and lacking["value"] is None
    assert "no predictions with gold values for 'de'" in lacking["undefined"]
    assert [g["passed"] for g in report["gates"] if g["method"] == "m"] == [True]
    # a group no method has is an input error
    capsys.readouterr()
    assert ucsj("report", str(m), str(b), "--gate", "acc[xx]>=0.1") == 2
    assert "'xx'" in capsys.readouterr().err


def test_a_pointwise_gate_without_group_checks_the_pairs_each_method_has(tmp_path):
    m = write(
        tmp_path / "m.jsonl",
        pointwise_rows("m", "fr", [1, 2, 3], [1.0, 2.0, 3.0])
        + pointwise_rows("m", "de", [1, 2, 3], [1.0, 2.0, 3.0]),
    )
    b = write(tmp_path / "b.jsonl", pointwise_rows("b", "fr", [1, 2, 3], [1.0, 3.0, 2.0]))
    code, report = report_json(tmp_path, m, b, gates=["tau>=0.3"])
    assert code == 0
    assert sorted((g["method"], g["group"]) for g in report["gates"]) == [
        ("b", "fr"),
        ("m", "de"),
        ("m", "fr"),
    ]


def test_the_terminal_says_no_verdict_when_no_sample_has_one(tmp_path, capsys):
    good = write(tmp_path / "a.jsonl", binary_rows("good", "fr", [1, 0], [1, 0]))
    silent = write(tmp_path / "b.jsonl", binary_rows("silent", "fr", [1, 0], [None, None]))
    capsys.readouterr()
    assert ucsj("report", str(good), str(silent)) == 0
    out = capsys.readouterr().out
    assert "0.000 [0.000, 0.000]" not in out
    silent_rows = [line for line in out.splitlines() if "no verdict for any sample" in line]
    assert len(silent_rows) == 3  # fr, avg, all of the method without verdicts
    assert all("1.000" in line for line in silent_rows)  # the no-verdict share stays shown
    summary_row = next(line for line in out.splitlines() if line.strip("│ ").startswith("silent"))
    assert summary_row.count("no verdict") == 3 and "0.000" not in summary_row


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("lang", "FR", "'FR' is not an ISO 639-1 language code"),
        ("lang", "xx", "'xx' is not an ISO 639-1 language code"),
        ("prob", 7, "must be a probability from 0 to 1 or null, got 7"),
        ("prob", "0.5", "must be a probability from 0 to 1 or null"),
    ],
)
def test_prediction_rows_are_validated_as_score_validates_samples(
    tmp_path, capsys, field, value, message
):
    rows = binary_rows("m", "fr", [1, 0], [1, 0])
    rows[1][field] = value
    path = write(tmp_path / "p.jsonl", rows)
    capsys.readouterr()
    assert ucsj("report", str(path)) == 2
    err = capsys.readouterr().err
    assert f"{path}:2 field '{field}': {message}" in err


def test_a_probability_in_range_or_null_is_accepted(tmp_path):
    rows = binary_rows("m", "fr", [1, 0, 1], [1, 0, None])
    for row, prob in zip(rows, (0.9, 0, None), strict=True):
        row["prob"] = prob
    code, report = report_json(tmp_path, write(tmp_path / "p.jsonl", rows))
    assert code == 0 and report["methods"]["m"]["fr"]["n"] == 3
