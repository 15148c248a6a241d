"""Bad input: exit 2, a message naming file, line and field, no request and no output file."""

from __future__ import annotations

import json

import pytest
from conftest import ucsj
from fakeserver import FakeLLMServer

GOOD = {"id": "a", "lang": "en", "context": ["P."], "query": "Q?", "answer": "A.", "label": 1}
CRITERIA = {
    "format": "ucsj.criteria/1",
    "task": "rag-faithfulness",
    "concepts": [
        {
            "id": "c1",
            "name": "Attribution",
            "description": "",
            "questions": [{"id": "c1.q1", "text": "Is every claim supported?"}],
        }
    ],
}


def line(**changes):
    record = {**GOOD, **changes}
    return json.dumps({k: v for k, v in record.items() if v is not ...})


BAD_DATA = [
    ("invalid JSON", b'{"id": "a",\n', ":1", "invalid JSON"),
    ("not UTF-8", line().encode() + b"\n" + b'{"id": "\xff\xfe"}\n', ":2", "not UTF-8"),
    (
        "missing field",
        (line() + "\n" + line(id="b", answer=...) + "\n").encode(),
        ":2 field 'answer'",
        "missing",
    ),
    ("empty field", line(answer="  ").encode(), ":1 field 'answer'", "empty"),
    ("wrong type", line(query=3).encode(), ":1 field 'query'", "must be a string"),
    ("id not a string", line(id=7).encode(), ":1 field 'id'", "non-empty string"),
    ("duplicate id", (line() + "\n" + line()).encode(), ":2 field 'id'", "duplicate id 'a'"),
    ("unknown language", line(lang="xx").encode(), ":1 field 'lang'", "ISO 639-1"),
    ("bad label", line(label=0.7).encode(), ":1 field 'label'", "must be 1"),
    ("empty file", b"", "data.jsonl", "empty"),
    ("not an object", b"[1, 2]\n", ":1", "not a JSON object"),
    ("huge line", line(answer="x" * 10_000_000).encode() + b"\n" + b"{bad\n", ":2", "invalid JSON"),
]


@pytest.mark.parametrize("data,where,what", [b[1:] for b in BAD_DATA], ids=[b[0] for b in BAD_DATA])
def test_bad_data_is_refused_before_any_request(tmp_path, capsys, data, where, what):
    (tmp_path / "data.jsonl").write_bytes(data)
    (tmp_path / "criteria.json").write_text(json.dumps(CRITERIA))
    out = tmp_path / "scores.jsonl"
    with FakeLLMServer() as server:
        code = ucsj(
            "score",
            str(tmp_path / "data.jsonl"),
            "--criteria",
            str(tmp_path / "criteria.json"),
            "-o",
            str(out),
            "--base-url",
            server.base_url,
            "--cache-dir",
            str(tmp_path / "cache"),
        )
        assert server.count == 0
    err = capsys.readouterr().err
    assert code == 2
    assert where in err and what in err, err
    assert not out.exists()
    assert not list(tmp_path.glob(".scores.jsonl.*")), "no temporary file left behind"


def test_missing_lang_without_option_then_lang_option(tmp_path, capsys):
    (tmp_path / "data.jsonl").write_text(line(lang=...))
    (tmp_path / "criteria.json").write_text(json.dumps(CRITERIA))
    args = [
        "score",
        str(tmp_path / "data.jsonl"),
        "--criteria",
        str(tmp_path / "criteria.json"),
        "-o",
        str(tmp_path / "s.jsonl"),
        "--cache",
        "replay",
        "--cache-dir",
        str(tmp_path / "cache"),
    ]
    assert ucsj(*args) == 2
    assert "field 'lang'" in capsys.readouterr().err
    assert ucsj(*args, "--lang", "zz") == 2
    assert "--lang 'zz'" in capsys.readouterr().err


BAD_CRITERIA = [
    (
        "no questions",
        {**CRITERIA, "concepts": [{**CRITERIA["concepts"][0], "questions": []}]},
        "has no questions",
    ),
    ("duplicate ids", {**CRITERIA, "concepts": [CRITERIA["concepts"][0]] * 2}, "duplicate id"),
    ("no concepts", {**CRITERIA, "concepts": []}, "'concepts' must be a non-empty list"),
    ("wrong format", {**CRITERIA, "format": "other/9"}, "not supported"),
    (
        "bad yes_means",
        {
            **CRITERIA,
            "concepts": [
                {
                    **CRITERIA["concepts"][0],
                    "questions": [{"id": "q", "text": "Ok?", "yes_means": "maybe"}],
                }
            ],
        },
        "yes_means",
    ),
]


@pytest.mark.parametrize(
    "criteria,what", [b[1:] for b in BAD_CRITERIA], ids=[b[0] for b in BAD_CRITERIA]
)
def test_bad_criteria_file(tmp_path, capsys, criteria, what):
    (tmp_path / "data.jsonl").write_text(line())
    (tmp_path / "criteria.json").write_text(json.dumps(criteria))
    code = ucsj(
        "score",
        str(tmp_path / "data.jsonl"),
        "--criteria",
        str(tmp_path / "criteria.json"),
        "-o",
        str(tmp_path / "s.jsonl"),
        "--cache",
        "replay",
        "--cache-dir",
        str(tmp_path / "cache"),
    )
    err = capsys.readouterr().err
    assert code == 2 and "criteria.json" in err and what in err, err
    assert not (tmp_path / "s.jsonl").exists()


def test_hand_written_criteria_with_yes_means_bad(tmp_path):
    from fakeserver import answer_lines

    criteria = {
        **CRITERIA,
        "concepts": [
            {
                "id": "risk",
                "name": "Hallucination",
                "questions": [
                    {
                        "id": "risk.invented",
                        "text": "Does the answer invent facts?",
                        "yes_means": "bad",
                    },
                    {"id": "risk.supported", "text": "Is the answer supported?"},
                ],
            }
        ],
    }
    (tmp_path / "criteria.json").write_text(json.dumps(criteria))
    (tmp_path / "data.jsonl").write_text(line())
    with FakeLLMServer(lambda body: answer_lines([0.9, 0.8])) as server:
        assert (
            ucsj(
                "score",
                str(tmp_path / "data.jsonl"),
                "--criteria",
                str(tmp_path / "criteria.json"),
                "-o",
                str(tmp_path / "s.jsonl"),
                "--base-url",
                server.base_url,
                "--cache-dir",
                str(tmp_path / "cache"),
            )
            == 0
        )
    row = json.loads((tmp_path / "s.jsonl").read_text())
    assert row["z"] == {"risk.invented": pytest.approx(0.1), "risk.supported": pytest.approx(0.8)}
    assert row["s"] == {"risk": pytest.approx(0.45)}


def test_unknown_task_and_bad_gate(tmp_path, capsys):
    assert (
        ucsj(
            "gen",
            "--task",
            "no-such-task",
            "-o",
            str(tmp_path / "c.json"),
            "--cache",
            "replay",
            "--cache-dir",
            str(tmp_path / "cache"),
        )
        == 2
    )
    assert "unknown task 'no-such-task'" in capsys.readouterr().err
    (tmp_path / "p.jsonl").write_text(
        json.dumps({"id": "a", "lang": "en", "label": 1, "method": "m", "prob": 0.9, "pred": 1})
        + "\n"
    )
    assert ucsj("report", str(tmp_path / "p.jsonl"), "--gate", "accuracy>0.5") == 2
    assert "bad --gate 'accuracy>0.5'" in capsys.readouterr().err


def test_judge_file_that_is_not_a_judge(tmp_path, capsys):
    (tmp_path / "judge.skops").write_bytes(b"not a pickle")
    (tmp_path / "s.jsonl").write_text("{}\n")
    assert (
        ucsj(
            "predict",
            str(tmp_path / "s.jsonl"),
            "--judge",
            str(tmp_path / "judge.skops"),
            "-o",
            str(tmp_path / "p.jsonl"),
        )
        == 2
    )
    assert "not a judge file" in capsys.readouterr().err


def test_crafted_judge_files_are_refused_without_running_code(tmp_path, capsys):
    """A pickle, or a skops archive holding a function, is refused before anything runs."""
    import joblib
    import skops.io

    marker = tmp_path / "ran"
    (tmp_path / "s.jsonl").write_text("{}\n")

    class Exploit:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    joblib.dump({"format": "ucsj.judge/1", "estimator": Exploit()}, tmp_path / "pickle.joblib")
    (tmp_path / "fn.skops").write_bytes(
        skops.io.dumps({"format": "ucsj.judge/1", "estimator": print, "meta": {}})
    )
    for name, what in (("pickle.joblib", "pickles are refused"), ("fn.skops", "builtins.print")):
        assert (
            ucsj(
                "predict",
                str(tmp_path / "s.jsonl"),
                "--judge",
                str(tmp_path / name),
                "-o",
                str(tmp_path / "p.jsonl"),
            )
            == 2
        )
        err = capsys.readouterr().err
        assert what in err, err
    assert not marker.exists(), "loading must not execute anything"
    assert not (tmp_path / "p.jsonl").exists()


def test_empty_training_file_is_named_as_empty(tmp_path, capsys):
    empty = tmp_path / "en.scores.jsonl"
    empty.write_text("\n")
    assert ucsj("fit", "--train", str(empty), "-o", str(tmp_path / "j.skops")) == 2
    assert f"{empty}: no records: the file is empty" in capsys.readouterr().err
    assert not (tmp_path / "j.skops").exists()


@pytest.mark.parametrize("limit", [0, 1 << 16], ids=["numpy sort", "set"])
def test_duplicate_ids_found_by_both_checks(tmp_path, monkeypatch, limit):
    # small files are checked with a set (score starts without numpy), large ones with numpy
    from ucsj import data
    from ucsj.errors import InputError
    from ucsj.tasks import load_task

    monkeypatch.setattr(data, "SET_CHECK_LIMIT", limit)
    path = tmp_path / "d.jsonl"
    ids = ["a", "b", "c", "b"]
    path.write_text("\n".join(line(id=i) for i in ids[:3]) + "\n")
    assert data.SampleFile(path, load_task("rag-faithfulness")).validate().count == 3
    path.write_text("\n".join(line(id=i) for i in ids) + "\n")
    with pytest.raises(InputError, match="duplicate id 'b'") as caught:
        data.SampleFile(path, load_task("rag-faithfulness")).validate()
    assert caught.value.line == 4
