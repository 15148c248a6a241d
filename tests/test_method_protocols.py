"""Each baseline judge's protocol, as its paper and reference code run it: the prompts sent,
the number of calls, the token caps, cut-off replies, shared checklists and reweighting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ucsj
from fakeserver import FakeLLMServer, Reply
from synth import write_dataset
from test_methods import ScriptedBaselines

from ucsj.methods.caps import CAPS


def judge(server: FakeLLMServer, data: Path, method: str, out: Path, *extra: str) -> int:
    return ucsj(
        "judge",
        str(data),
        "--method",
        method,
        "--task",
        "rag-faithfulness",
        "-o",
        str(out),
        "--base-url",
        server.base_url,
        "--cache-dir",
        str(out.parent / f"cache-{out.stem}"),
        *extra,
    )


def rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


@pytest.fixture()
def fr(tmp_path):
    labels = write_dataset(tmp_path / "fr.jsonl", "fr", 4)
    return tmp_path, labels


# -- caps and cut-off replies -------------------------------------------------------------------


@pytest.mark.parametrize(
    "method,caps",
    [
        ("cot", {"cot.reasoning"}),
        ("guidelines", {"guidelines.reasoning"}),
        ("zero-shot", {"zero-shot.answer"}),
        ("chateval", {"chateval.turn"}),
        ("checkeval", {"checkeval.answers"}),
    ],
)
def test_every_call_is_capped_as_the_caps_table_says(fr, method, caps):
    root, labels = fr
    with FakeLLMServer(ScriptedBaselines(labels)) as server:
        assert judge(server, root / "fr.jsonl", method, root / "out.jsonl") == 0
        sent = {body["max_tokens"] for body in server.requests}
    assert sent == {CAPS[step].tokens for step in caps}


def test_the_caps_follow_the_references():
    assert CAPS["chateval.turn"].tokens == 512  # ChatEval's config
    assert CAPS["ce-judge.judgment"].tokens == 8192  # CE-Judge's main.py
    assert CAPS["rocketeval.grade"].tokens == 1  # RocketEval's grading call
    assert CAPS["cot.reasoning"].tokens >= 2048 and CAPS["guidelines.reasoning"].tokens >= 2048


class CutOff(ScriptedBaselines):
    """Reasoning replies stop at the cap before their verdict line."""

    def __call__(self, body: dict) -> Reply:
        reply = super().__call__(body)
        if body["max_tokens"] == CAPS["cot.reasoning"].tokens:
            return Reply(text="I compared the first claim with the", finish_reason="length")
        return reply


def test_a_reply_cut_off_at_its_cap_is_flagged_in_predictions_and_report(fr, capsys):
    root, labels = fr
    with FakeLLMServer(CutOff(labels)) as server:
        assert judge(server, root / "fr.jsonl", "cot", root / "cot.jsonl") == 0
    assert "4 with a reply cut off at its cap" in capsys.readouterr().err
    judged = rows(root / "cot.jsonl")
    assert [r["cut_off"] for r in judged] == [1, 1, 1, 1]
    assert all(r["pred"] is None for r in judged)
    assert ucsj("report", str(root / "cot.jsonl"), "--json", str(root / "r.json")) == 0
    table = capsys.readouterr().out
    assert "cut off" in table and "no verdict" in table
    report = json.loads((root / "r.json").read_text())["methods"]["cot"]
    assert report["fr"]["cut_off"] == 1.0 and report["fr"]["error_rate"] == 1.0


def test_replies_within_their_cap_are_not_flagged(fr):
    root, labels = fr
    with FakeLLMServer(ScriptedBaselines(labels)) as server:
        assert judge(server, root / "fr.jsonl", "cot", root / "cot.jsonl") == 0
    assert [r["cut_off"] for r in rows(root / "cot.jsonl")] == [0, 0, 0, 0]


# -- ChatEval -----------------------------------------------------------------------------------


def test_chateval_two_referees_two_rounds_verdict_in_the_final_round_only(tmp_path):
    labels = write_dataset(tmp_path / "fr.jsonl", "fr", 1)
    with FakeLLMServer(ScriptedBaselines(labels)) as server:
        assert judge(server, tmp_path / "fr.jsonl", "chateval", tmp_path / "ce.jsonl") == 0
        calls = list(server.requests)
    assert len(calls) == 4  # 2 referees x 2 rounds, in turn
    speakers = ["General Public", "Critic", "General Public", "Critic"]
    for turn, (body, speaker) in enumerate(zip(calls, speakers, strict=True)):
        roles = [m["role"] for m in body["messages"]]
        assert roles == ["system", "user", *["assistant"] * turn, "user"]
        task_prompt = body["messages"][1]["content"]
        assert f"You are {speaker}, one of the referees" in task_prompt
        assert f"It is your turn to speak, {speaker}." in task_prompt
        heard = [m["content"] for m in body["messages"] if m["role"] == "assistant"]
        assert [h.split(":", 1)[0] for h in heard] == speakers[:turn]  # everyone sees everything
        final = turn >= 2
        assert ("Verdict: Yes" in body["messages"][-1]["content"]) is final
        assert bool(body.get("logprobs")) is final
        assert body["max_tokens"] == 512
    assert "Verdict" not in calls[0]["messages"][1]["content"]
    (row,) = rows(tmp_path / "ce.jsonl")
    assert row["pred"] == row["label"] and row["cut_off"] == 0
