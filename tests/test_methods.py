"""The baseline judges: verdict parsing, protocols, and each method end to end."""

from __future__ import annotations

import json
import re

import pytest
from conftest import ROOT, ucsj
from fakeserver import FakeLLMServer, Reply, answer_lines
from synth import write_dataset

from ucsj.answers import final_verdict
from ucsj.llm.response import Completion
from ucsj.methods import METHODS, Judgement, aggregate_panel


def text(t: str) -> Completion:
    return Completion(t, "stop", None, None, None, {})


@pytest.mark.parametrize(
    "reply,pred",
    [
        ("The passage states 1932.\nVerdict: Yes", 1),
        ("Reasoning about it.\n\n**Verdict:** No", 0),
        ("Step 1: the year matches, yes.\nStep 2: the material differs.\nVerdict: No", 0),
        ("Final answer: Not supported.", 0),
        ("Verdict: Supported", 1),
        ("Verdict: yes\nActually, on reflection:\nVerdict: no", 0),  # the last verdict counts
        ("Yes", 1),
        ("The answer is mostly fine but I am unsure.", None),
        ("Verdict: maybe", None),
        ("", None),
    ],
)
def test_final_verdict(reply, pred):
    assert final_verdict(text(reply)).pred == pred


def test_panel_majority_and_tie_break():
    yes, no = Judgement(1, 0.9), Judgement(0, 0.4)
    assert aggregate_panel([yes, yes]) == Judgement(1, 0.9)
    assert aggregate_panel([yes, no]).pred == 1  # tie: mean P(yes) 0.65
    assert aggregate_panel([Judgement(1, 0.55), Judgement(0, 0.05)]).pred == 0  # mean 0.3
    assert aggregate_panel([Judgement(None, None), no]).pred == 0
    assert aggregate_panel([Judgement(None, None)] * 2) == Judgement(None, None)


class ScriptedBaselines:
    """Plays every baseline prompt; right about the label unless `garbage`."""

    def __init__(self, labels: dict[str, int], garbage: bool = False) -> None:
        self.labels, self.garbage = labels, garbage

    def __call__(self, body: dict) -> Reply:
        users = [m["content"] for m in body["messages"] if m["role"] == "user"]
        prompt = next((u for u in users if "<output>" in u), users[-1])
        last = body["messages"][-1]["content"]
        if self.garbage:
            return Reply(text="I would rather not say.")
        output = re.search(r"<output>\n(.*?)\n</output>", prompt, re.S)
        label = self.labels[output.group(1)] if output else None
        word = " Yes" if label else " No"
        ending = prompt.rstrip().rsplit("\n", 1)[-1]
        if ending.startswith("Answer with Yes") or body["max_tokens"] == 1:
            p = 0.9 if label else 0.2
            return Reply(tokens=[(word, {" Yes": p, " No": 1 - p})])
        if last == "":  # a ChatEval referee's turn before the final round
            return Reply(text="I checked the year against the passage.")
        if 'last line that is exactly "Verdict: Yes"' in last:
            return Reply(text=f"I compared the claims with the source.\nVerdict:{word}")
        if ending == "Questions:" or "list of binary (yes/no) questions" in prompt:
            return Reply(text="1. Is the year stated in the passages?\n2. Is the place right?")
        if ending == "Concepts:":
            return Reply(text="- a bridge\n- an opening year")
        if ending == "Translation:":
            return Reply(text=re.search(r"Text:\n(.*)\n\nTranslation:", prompt, re.S).group(1))
        if ending == "Checklist:":
            return Reply(text="1. Check the year against the passage.\n2. Check the place.")
        questions = re.findall(r"^Q\d+\. ", prompt, re.M)
        return answer_lines([0.9 if label else 0.1] * len(questions))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("methods")
    labels = write_dataset(root / "fr.jsonl", "fr", 12) | write_dataset(root / "en.jsonl", "en", 12)
    return root, labels


def _scores_for_aggregator(root, server, common):
    criteria = {
        "task": "rag-faithfulness",
        "concepts": [
            {
                "id": "c1",
                "name": "Attribution",
                "questions": [{"id": "c1.q1", "text": "Is every claim supported?"}],
            }
        ],
    }
    (root / "criteria.json").write_text(json.dumps(criteria))
    assert (
        ucsj(
            "score",
            str(root / "fr.jsonl"),
            "--criteria",
            str(root / "criteria.json"),
            "-o",
            str(root / "fr.scores.jsonl"),
            *common,
        )
        == 0
    )
    return ["--scores", str(root / "fr.scores.jsonl"), "--criteria", str(root / "criteria.json")]


@pytest.mark.parametrize("method", list(METHODS))
def test_every_method_end_to_end(data, method):
    root, labels = data
    with FakeLLMServer(ScriptedBaselines(labels)) as server:
        common = [
            "--base-url",
            server.base_url,
            "--cache-dir",
            str(root / "cache"),
            "--model",
            "judge-2025-01-01",
        ]
        extra = _scores_for_aggregator(root, server, common) if method == "llm-aggregator" else []
        out = root / f"{method}.jsonl"
        assert (
            ucsj(
                "judge",
                str(root / "fr.jsonl"),
                "--method",
                method,
                "--task",
                "rag-faithfulness",
                "-o",
                str(out),
                *extra,
                *common,
            )
            == 0
        )
        before = server.count
        assert (
            ucsj(
                "judge",
                str(root / "fr.jsonl"),
                "--method",
                method,
                "--task",
                "rag-faithfulness",
                "-o",
                str(root / "again.jsonl"),
                *extra,
                *common,
            )
            == 0
        )
        assert server.count == before, "a rerun is served from the cache"
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == [f"fr-{i:03d}" for i in range(12)]
    assert all(r["method"] == method for r in rows)
    assert all(r["pred"] == r["label"] for r in rows), rows
    assert (root / "again.jsonl").read_bytes() == out.read_bytes()
    calls = {
        "zero-shot": 1,
        "cot": 1,
        "guidelines": 1,
        "llm-aggregator": 1,
        "chateval": 4,
        "rocketeval": 3,
        "checkeval": 3,
        "ce-judge": 7,
    }[method]
    scored = 12 if method == "llm-aggregator" else 0  # the criteria scores it reads
    assert before == 12 * calls + scored
    if method in ("rocketeval", "checkeval"):
        assert all(0 <= r["prob"] <= 1 and r["items"] for r in rows)


def test_unparseable_verdicts_count_as_wrong(data, capsys):
    root, labels = data
    with FakeLLMServer(ScriptedBaselines(labels, garbage=True)) as server:
        assert (
            ucsj(
                "judge",
                str(root / "fr.jsonl"),
                "--method",
                "cot",
                "--task",
                "rag-faithfulness",
                "-o",
                str(root / "bad.jsonl"),
                "--base-url",
                server.base_url,
                "--cache-dir",
                str(root / "cache2"),
            )
            == 0
        )
    assert "12 without a readable verdict" in capsys.readouterr().err
    assert ucsj("report", str(root / "bad.jsonl"), "--json", str(root / "bad.json")) == 0
    fr = json.loads((root / "bad.json").read_text())["methods"]["cot"]["fr"]
    assert fr["error_rate"] == 1.0 and fr["ba"] == 0.0  # MEMERAG's rule: no verdict = wrong


def test_rocketeval_calibration_and_threshold(data):
    root, labels = data
    with FakeLLMServer(ScriptedBaselines(labels)) as server:
        common = [
            "--base-url",
            server.base_url,
            "--cache-dir",
            str(root / "cache"),
            "--model",
            "judge-2025-01-01",
            "--task",
            "rag-faithfulness",
        ]
        assert (
            ucsj(
                "judge",
                str(root / "fr.jsonl"),
                "--method",
                "rocketeval",
                "--calibrate-on",
                str(root / "en.jsonl"),
                "-o",
                str(root / "cal.jsonl"),
                *common,
            )
            == 0
        )
        assert (
            ucsj(
                "judge",
                str(root / "fr.jsonl"),
                "--method",
                "rocketeval",
                "--threshold",
                "0.95",
                "-o",
                str(root / "strict.jsonl"),
                *common,
            )
            == 0
        )
    calibrated = [json.loads(x) for x in (root / "cal.jsonl").read_text().splitlines()]
    assert all(r["pred"] == r["label"] for r in calibrated)
    strict = [json.loads(x) for x in (root / "strict.jsonl").read_text().splitlines()]
    assert all(r["pred"] == 0 for r in strict), "mean item score 0.9 is below 0.95"


def test_report_puts_every_method_in_one_table(data, capsys):
    root, _ = data
    files = [str(root / f"{m}.jsonl") for m in METHODS if (root / f"{m}.jsonl").exists()]
    assert len(files) == len(METHODS)
    assert ucsj("report", *files, "--json", str(root / "all.json")) == 0
    out = capsys.readouterr().out
    assert "Balanced accuracy (* best per column)" in out
    for method in METHODS:
        assert method in out
    report = json.loads((root / "all.json").read_text())
    assert set(report["methods"]) == set(METHODS)


def test_llm_aggregator_needs_scores(data, capsys):
    root, _ = data
    assert (
        ucsj(
            "judge",
            str(root / "fr.jsonl"),
            "--method",
            "llm-aggregator",
            "--task",
            "rag-faithfulness",
            "-o",
            str(root / "x.jsonl"),
            "--cache",
            "replay",
        )
        == 2
    )
    assert "needs --scores and --criteria" in capsys.readouterr().err


BASELINE_RECORDINGS = ROOT / "fixtures" / "demo" / "baselines.jsonl"


def test_judged_texts_are_fenced_in_every_prompt(data):
    """Strip every fenced block: no judged text (source, input, output) may be left over."""
    root, labels = data
    sample = json.loads((root / "fr.jsonl").read_text().splitlines()[0])
    texts = [sample["answer"], sample["query"], *sample["context"]]
    with FakeLLMServer(ScriptedBaselines(labels)) as server:
        common = [
            "--base-url",
            server.base_url,
            "--cache-dir",
            str(root / "fence-cache"),
            "--task",
            "rag-faithfulness",
        ]
        (root / "one.jsonl").write_text(json.dumps(sample) + "\n")
        for method in METHODS:
            if method == "llm-aggregator":
                continue  # its prompt is the same sample block as cot's, plus scores
            assert (
                ucsj(
                    "judge",
                    str(root / "one.jsonl"),
                    "--method",
                    method,
                    "-o",
                    str(root / "fenced.jsonl"),
                    *common,
                )
                == 0
            )
        prompts = [m["content"] for body in server.requests for m in body["messages"]]
    fenced = re.compile(r"<(\w+)>\n.*?\n</\1>", re.S)
    for prompt in prompts:
        outside = fenced.sub("", prompt)
        for text in texts:
            assert text not in outside, (text, prompt)
