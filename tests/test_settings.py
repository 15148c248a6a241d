"""Pointwise scores and pairwise preferences: tasks, records, converters and metrics."""

from __future__ import annotations

import itertools
import json

import pytest
from conftest import ucsj

from ucsj.data import SampleFile
from ucsj.errors import InputError
from ucsj.metrics import kendall_interval, kendall_tau, pairwise_metrics
from ucsj.tasks import load_task


def test_presets_carry_their_kind():
    assert load_task("literary-translation").kind == "pointwise"
    assert load_task("literary-translation").scale == (1, 7)
    chat = load_task("multilingual-chat")
    assert chat.kind == "pairwise" and chat.fields.output_b == "response_b"
    assert load_task("rag-faithfulness").kind == "binary"


@pytest.mark.parametrize(
    "task,record,what",
    [
        (
            "literary-translation",
            {"source": "Der Hund.", "translation": "The dog.", "score": 9},
            "field 'score': must be an integer from 1 to 7",
        ),
        (
            "literary-translation",
            {"source": "Der Hund.", "translation": "The dog.", "score": 2.5},
            "field 'score'",
        ),
        (
            "multilingual-chat",
            {"prompt": "Hi?", "response_a": "Hello.", "preference": "a"},
            "field 'response_b': missing",
        ),
        (
            "multilingual-chat",
            {"prompt": "Hi?", "response_a": "Hi.", "response_b": "Yo.", "preference": "c"},
            'field \'preference\': must be "a", "b"',
        ),
    ],
)
def test_bad_pointwise_and_pairwise_records(tmp_path, task, record, what):
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps({"id": "x", "lang": "en", **record}) + "\n")
    with pytest.raises(InputError) as error:
        SampleFile(path, load_task(task)).validate()
    assert what in str(error.value) and "d.jsonl:1" in str(error.value)


def test_good_records_and_binary_only_commands(tmp_path, capsys):
    path = tmp_path / "d.jsonl"
    path.write_text(
        json.dumps(
            {
                "id": "x",
                "lang": "fr",
                "prompt": "Salut ?",
                "response_a": "A.",
                "response_b": "B.",
                "preference": "b",
            }
        )
        + "\n"
    )
    (sample,) = SampleFile(path, load_task("multilingual-chat"))
    assert (sample.output, sample.output_b, sample.preference) == ("A.", "B.", "b")
    (tmp_path / "c.json").write_text(
        json.dumps(
            {
                "task": "multilingual-chat",
                "concepts": [
                    {
                        "id": "c1",
                        "name": "Helpful",
                        "questions": [{"id": "c1.q1", "text": "Helpful?"}],
                    }
                ],
            }
        )
    )
    # scoring a pairwise sample scores both responses; judging it needs a pairwise method
    assert ucsj("judge", str(path), "--method", "cot", "--task", "multilingual-chat") == 2
    err = capsys.readouterr().err
    assert "cot judges binary tasks only" in err
    assert "use zero-shot, ce-judge" in err


def test_convert_mm_eval_counts_rows_of_other_subsets_apart_from_unlabelled_ones(tmp_path, capsys):
    rows = [
        {"id": i, "prompt": "q?", "chosen": "good", "rejected": "bad", "language": "de"}
        for i in range(3)
    ]
    rows[0]["subset"], rows[1]["subset"], rows[2]["subset"] = "chat", "safety", "safety"
    raw = tmp_path / "mm.jsonl"
    raw.write_text("".join(json.dumps(r) + "\n" for r in rows))
    capsys.readouterr()
    assert ucsj("convert", "mm-eval", str(raw), "-o", str(tmp_path / "o.jsonl")) == 0
    err = capsys.readouterr().err
    assert "1 samples" in err and "left out 2 of other subsets" in err
    assert "without a label" not in err
    assert (
        ucsj("convert", "mm-eval", str(raw), "--subset", "nope", "-o", str(tmp_path / "n.jsonl"))
        == 0
    )
    err = capsys.readouterr().err
    assert "left out 3 of other subsets" in err and "without a label" not in err


def test_convert_mm_eval_balances_positions(tmp_path):
    raw = tmp_path / "mm.jsonl"
    rows = [
        {
            "id": i,
            "prompt": f"Question {i}?",
            "chosen": f"good {i}",
            "rejected": f"bad {i}",
            "language": "de" if i % 2 else "sw",
            "subset": "chat" if i < 30 else "reasoning",
        }
        for i in range(40)
    ]
    rows.append({**rows[0], "id": 98, "subset": "safety"})
    rows.append(
        {
            "id": 99,
            "prompt": "x",
            "chosen": "y",
            "rejected": "z",
            "language": "yo",
            "subset": "lang_res",
        }
    )
    raw.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    assert ucsj("convert", "mm-eval", str(raw), "-o", str(out)) == 0
    samples = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(samples) == 40, "CE-Judge's subsets by default: chat and reasoning"
    for s in samples:
        better = s["response_a"] if s["preference"] == "a" else s["response_b"]
        assert better.startswith("good")
    firsts = sum(s["preference"] == "a" for s in samples)
    assert 10 <= firsts <= 30, "the chosen response is not always first"
    assert SampleFile(out, load_task("multilingual-chat")).validate().count == 40
    assert ucsj("convert", "mm-eval", str(raw), "--subset", "reasoning", "-o", str(out)) == 0
    assert len(out.read_text().splitlines()) == 10
    assert ucsj("convert", "mm-eval", str(raw), "--subset", "safety", "-o", str(out)) == 0
    assert len(out.read_text().splitlines()) == 1, "other subsets on request"


def test_convert_liteval_semicolon_csv(tmp_path):
    raw = tmp_path / "Student_annotation_2_de-en.csv"
    raw.write_text(
        "source;tgt;pair;rating\nDer Hund schläft.;The dog sleeps.;de-en;5\n"
        "Die Katze.;The cat;de-en;0\nLeer.;Empty.;de-en;\n",
        encoding="utf-8",
    )
    out = tmp_path / "out.jsonl"
    assert ucsj("convert", "liteval", str(raw), "--shift", "1", "-o", str(out)) == 0
    samples = [json.loads(x) for x in out.read_text().splitlines()]
    assert [(s["lang"], s["source_lang"], s["score"]) for s in samples] == [
        ("en", "de", 6),
        ("en", "de", 1),
    ]
    assert SampleFile(out, load_task("literary-translation")).validate().count == 2


def test_kendall_tau_matches_a_direct_count():
    gold = [1, 3, 2, 5, 4, 7, 6]
    pred = [2, 1, 3, 6, 5, 4, 7]
    pairs = list(itertools.combinations(range(len(gold)), 2))
    concordant = sum((gold[i] - gold[j]) * (pred[i] - pred[j]) > 0 for i, j in pairs)
    discordant = sum((gold[i] - gold[j]) * (pred[i] - pred[j]) < 0 for i, j in pairs)
    assert kendall_tau(gold, pred) == pytest.approx((concordant - discordant) / len(pairs))
    low, high = kendall_interval(gold, pred)
    assert low <= kendall_tau(gold, pred) <= high


def test_a_judge_that_always_picks_the_first_position_scores_half():
    gold = ["a", "b"] * 10
    always_first_forward = ["a"] * 20
    always_first_backward = ["b"] * 20  # first position of the swapped pair is original b
    result = pairwise_metrics(gold, always_first_forward, always_first_backward)
    assert result.acc == 0.5 and result.position_bias == 1.0 and result.consistency == 0.0
    assert result.acc_low == result.acc_high == 0.5  # every pair scores exactly half
    perfect = pairwise_metrics(gold, gold, gold)
    assert perfect.acc == 1.0 and perfect.position_bias == 0.5 and perfect.consistency == 1.0
    missing = pairwise_metrics(["a"], [None], ["a"])
    assert missing.acc == 0.5 and missing.error_rate == 0.5  # no verdict counts as wrong
