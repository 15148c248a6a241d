"""Each baseline judge's protocol, as its paper and reference code run it: the prompts sent,
the number of calls, the token caps, cut-off replies, shared checklists and reweighting."""

from __future__ import annotations

import json
import re
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
    page = root / "r.html"
    report_args = ["--json", str(root / "r.json"), "--html", str(page)]
    assert ucsj("report", str(root / "cot.jsonl"), *report_args) == 0
    table = capsys.readouterr().out
    assert "cut off" in table and "no verdict" in table
    report = json.loads((root / "r.json").read_text())["methods"]["cot"]
    assert report["fr"]["cut_off"] == 1.0 and report["fr"]["error_rate"] == 1.0
    html = page.read_text(encoding="utf-8")  # the page has the terminal's columns too
    assert "<th>cut off</th>" in html and '<td class="extra">1.000</td>' in html


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


# -- RocketEval ---------------------------------------------------------------------------------


def write_answers(path: Path, lang: str, topics: dict[int, list[tuple[str, int]]]) -> None:
    """Several answer sentences per query (MEMERAG's layout): topic -> [(sentence, label)]."""
    with path.open("w", encoding="utf-8") as out:
        for topic, sentences in topics.items():
            for i, (sentence, label) in enumerate(sentences):
                record = {
                    "id": f"{lang}-{topic}-{i}",
                    "lang": lang,
                    "context": [f"Bridge {topic} was opened in {1900 + topic}.", "Other passage."],
                    "query": f"When was bridge {topic} opened?",
                    "answer": sentence,
                    "label": label,
                }
                out.write(json.dumps(record) + "\n")


def _sentences(topic: int) -> list[tuple[str, int]]:
    return [
        (f"It opened in {1900 + topic}. [{topic}a]", 1),
        (f"It opened in {1907 + topic}. [{topic}b]", 0),
        (f"It was opened in {1900 + topic}. [{topic}c]", 1),
    ]


def test_rocketeval_writes_one_checklist_per_input_shared_by_its_samples(tmp_path):
    write_answers(tmp_path / "en.jsonl", "en", {1: _sentences(1), 2: _sentences(2)})
    labels = {s: label for t in (1, 2) for s, label in _sentences(t)}
    with FakeLLMServer(ScriptedBaselines(labels)) as server:
        assert judge(server, tmp_path / "en.jsonl", "rocketeval", tmp_path / "r.jsonl") == 0
        calls = list(server.requests)
    create = [b for b in calls if b["max_tokens"] == CAPS["rocketeval.checklist"].tokens]
    grade = [b for b in calls if b["max_tokens"] == 1]
    assert len(create) == 2, "one checklist per distinct input, not per sample"
    assert len(grade) == 6 * 2 and len(calls) == 2 + 12  # two items for each of six samples
    for body in create:
        prompt = body["messages"][-1]["content"]
        assert "<output>" not in prompt and "When was bridge" in prompt  # the input alone
    assert all(b.get("logprobs") and b["top_logprobs"] == 5 for b in grade)
    judged = rows(tmp_path / "r.jsonl")
    by_input = {}
    for row in judged:
        by_input.setdefault(row["input_key"], []).append(row)
    assert sorted(len(v) for v in by_input.values()) == [3, 3]
    for members in by_input.values():
        assert len({json.dumps(r["checklist"]) for r in members}) == 1
    assert all(r["pred"] == r["label"] and r["reweighted"] is False for r in judged)
    assert all(r["prob"] == pytest.approx(sum(r["items"]) / len(r["items"])) for r in judged)


class ItemOneDecides(ScriptedBaselines):
    """Item 1 carries the label; item 2 says the opposite, so the plain mean is always 0.5."""

    def __call__(self, body: dict) -> Reply:
        if body["max_tokens"] != 1:
            return super().__call__(body)
        prompt = body["messages"][-1]["content"]
        label = self.labels[re.search(r"<output>\n(.*?)\n</output>", prompt, re.S).group(1)]
        first = "Question: Is the year stated in the passages?" in prompt
        p = 0.8 if (label == 1) == first else 0.2
        return Reply(tokens=[(" Yes", {" Yes": p, " No": 1 - p})])


def test_rocketeval_learns_item_weights_per_query_where_labels_exist(tmp_path):
    # calibration: labelled answers to queries 1 and 2; judged: new answers to 1, 2 and 3
    write_answers(tmp_path / "cal.jsonl", "en", {1: _sentences(1), 2: _sentences(2)})
    judged_topics = {
        t: [(f"Maybe {1900 + t + k}. [{t}n{k}]", int(k == 0)) for k in (0, 7)] for t in (1, 2, 3)
    }
    write_answers(tmp_path / "en.jsonl", "en", judged_topics)
    labels = {s: label for t in (1, 2) for s, label in _sentences(t)}
    labels |= {s: label for v in judged_topics.values() for s, label in v}
    with FakeLLMServer(ItemOneDecides(labels)) as server:
        out = tmp_path / "r.jsonl"
        extra = ["--calibrate-on", str(tmp_path / "cal.jsonl")]
        assert judge(server, tmp_path / "en.jsonl", "rocketeval", out, *extra) == 0
    judged = {r["id"]: r for r in rows(out)}
    for topic in (1, 2):  # queries with labels: item 1 learned to decide
        for k, label in ((0, 1), (1, 0)):
            row = judged[f"en-{topic}-{k}"]
            assert row["reweighted"] is True and row["pred"] == label
            assert row["prob"] != pytest.approx(0.5)
    for k in (0, 1):  # a query without labels: the unweighted mean
        row = judged[f"en-3-{k}"]
        assert row["reweighted"] is False and row["prob"] == pytest.approx(0.5)


def test_label_spread_weight_follows_the_reference():
    from ucsj.methods.rocketeval import label_spread_weight

    assert label_spread_weight([0, 1]) == pytest.approx(1.0)
    assert label_spread_weight([1, 1, 1]) == pytest.approx(0.0)
    assert 0 < label_spread_weight([0, 1, 1, 1]) < 1


# -- thresholds ---------------------------------------------------------------------------------


def test_the_calibrated_threshold_maximizes_balanced_accuracy():
    from ucsj.methods.calibration import choose_threshold

    assert choose_threshold([0.1, 0.2, 0.6, 0.7], [0, 0, 1, 1]) == pytest.approx(0.4)
    # everything scores high: only a threshold above 0.5 separates the classes
    assert choose_threshold([0.7, 0.75, 0.9, 0.95], [0, 0, 1, 1]) == pytest.approx(0.825)


@pytest.mark.parametrize("method", ["rocketeval", "checkeval"])
def test_checklist_judges_pass_at_half_unless_calibrated_on_english(tmp_path, method, capsys):
    fr_labels = write_dataset(tmp_path / "fr.jsonl", "fr", 8)
    en_labels = write_dataset(tmp_path / "en.jsonl", "en", 8)

    class High(ScriptedBaselines):  # every answer leans yes: 0.9 when right, 0.6 when not
        def __call__(self, body: dict) -> Reply:
            reply = super().__call__(body)
            if body["max_tokens"] == 1:
                p = 0.9 if reply.content().strip() == "Yes" else 0.6
                return Reply(tokens=[(" Yes", {" Yes": p, " No": 1 - p})])
            if re.search(r"^Q1\. ", body["messages"][-1]["content"], re.M):  # CheckEval
                n = len(re.findall(r"^Q\d+\. ", body["messages"][-1]["content"], re.M))
                yes = reply.content().count("Yes") == n
                return Reply(
                    text="\n".join(
                        f"Q{i}: {'Yes' if yes or i == 1 else 'No'}" for i in range(1, n + 1)
                    )
                )
            return reply

    with FakeLLMServer(High(fr_labels | en_labels)) as server:
        plain, calibrated = tmp_path / "plain.jsonl", tmp_path / "cal.jsonl"
        assert judge(server, tmp_path / "fr.jsonl", method, plain) == 0
        extra = ["--calibrate-on", str(tmp_path / "en.jsonl")]
        assert judge(server, tmp_path / "fr.jsonl", method, calibrated, *extra) == 0
        assert "calibrated on" in capsys.readouterr().err
        both = [*extra, "--threshold", "0.7"]
        assert judge(server, tmp_path / "fr.jsonl", method, tmp_path / "x.jsonl", *both) == 2
    assert "exclude each other" in capsys.readouterr().err
    plain_rows, cal_rows = rows(plain), rows(calibrated)
    assert {r["pred"] for r in plain_rows} == {1}, "at 0.5 everything passes"
    assert all(r["pred"] == r["label"] for r in cal_rows), "the English threshold separates"


# -- CE-Judge -----------------------------------------------------------------------------------


def echo_judge(body: dict) -> Reply:
    """Answers every CE-Judge step in shape; a translation echoes its text."""
    prompt = body["messages"][-1]["content"]
    ending = prompt.rstrip().rsplit("\n", 1)[-1]
    if ending == "Concepts:":
        return Reply(text="- a river\n- a valley\n- a journey\n- the night\n- the sea")
    if ending == "Translation:":
        return Reply(text=re.search(r"<data>\n(.*)\n</data>", prompt, re.S).group(1))
    if ending == "Checklist:":
        return Reply(text="\n".join(f"{i}. How is point {i} rendered?" for i in range(1, 9)))
    if '"Verdict: A" or "Verdict: B"' in prompt:
        return Reply(text="A reads better.\nVerdict: A")
    if '"Score: X"' in prompt:
        return Reply(text="Faithful.\nScore: 5")
    return Reply(text="Fine.\nVerdict: Yes")


def _translations(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def _judge_task(server, data: Path, task: str, out: Path) -> int:
    return ucsj(
        "judge", str(data), "--method", "ce-judge", "--task", task, "-o", str(out),
        "--base-url", server.base_url, "--cache-dir", str(out.parent / f"c-{out.stem}"),
    )  # fmt: skip


def _translated(requests: list[dict]) -> list[str]:
    return [
        re.search(r"<data>\n(.*)\n</data>", b["messages"][-1]["content"], re.S).group(1)
        for b in requests
        if b["messages"][-1]["content"].rstrip().endswith("Translation:")
    ]


def test_ce_judge_translates_each_text_from_its_own_language(tmp_path):
    german, english = "Der Fluss fließt langsam.", "The river flows slowly."
    _translations(
        tmp_path / "p.jsonl",
        [
            {"id": "de-en-1", "lang": "en", "source_lang": "de", "pair": "de-en",
             "source": german, "translation": english, "score": 5},
            {"id": "en-de-1", "lang": "de", "source_lang": "en", "pair": "en-de",
             "source": english + " [2]", "translation": german + " [2]", "score": 5},
        ],
    )  # fmt: skip
    with FakeLLMServer(echo_judge) as server:
        assert (
            _judge_task(server, tmp_path / "p.jsonl", "literary-translation", tmp_path / "o.jsonl")
            == 0
        )
        translated = _translated(server.requests)
    # the German source of de-en and the German translation of en-de; no English text
    assert sorted(translated) == sorted([german, german + " [2]"])


def test_ce_judge_bounds_counts_in_the_pairwise_setting_only(tmp_path):
    pair = {
        "id": "de-1",
        "lang": "de",
        "subset": "chat",
        "prompt": "Wie?",
        "response_a": "So.",
        "response_b": "Anders.",
        "preference": "a",
    }
    point = {"id": "de-en-1", "lang": "en", "source_lang": "de", "pair": "de-en",
             "source": "Der Fluss.", "translation": "The river.", "score": 5}  # fmt: skip
    _translations(tmp_path / "pair.jsonl", [pair])
    _translations(tmp_path / "point.jsonl", [point])
    with FakeLLMServer(echo_judge) as server:
        assert (
            _judge_task(server, tmp_path / "pair.jsonl", "multilingual-chat", tmp_path / "a.jsonl")
            == 0
        )
        pairwise = [b["messages"][-1]["content"] for b in server.requests]
        seen = len(server.requests)
        assert (
            _judge_task(
                server, tmp_path / "point.jsonl", "literary-translation", tmp_path / "b.jsonl"
            )
            == 0
        )
        pointwise = [b["messages"][-1]["content"] for b in server.requests[seen:]]
        caps = {b["max_tokens"] for b in server.requests[seen:]}
    concepts = [p for p in pairwise if p.rstrip().endswith("Concepts:")]
    checklists = [p for p in pairwise if p.rstrip().endswith("Checklist:")]
    assert concepts and all("between 1 and 4 concepts" in p for p in concepts)
    # (identical prompts, e.g. the two input-to-output ones here, are asked once)
    out_in = [p for p in checklists if "between 1 and 3 items" in p]
    in_out = [p for p in checklists if "between 1 and 6 items" in p]
    assert out_in and in_out and len(out_in) + len(in_out) == len(checklists)
    assert not any("between 1 and" in p for p in pointwise)
    judged = [p for p in pairwise if '"Verdict: A" or "Verdict: B"' in p]
    assert len(judged) == 2 and all(p.count("How is point") == 18 for p in judged)  # (3 + 6) x 2
    scored = next(p for p in pointwise if '"Score: X"' in p)
    assert scored.count("How is point") == 16, "pointwise: every item the model writes"
    assert caps == {CAPS["ce-judge.judgment"].tokens, CAPS["ce-judge.translate"].tokens}


def test_long_texts_are_translated_in_chunks_of_whole_sentences(tmp_path):
    from ucsj.methods.ce_judge import TRANSLATE_CHUNK, sentence_chunks

    sentences = [f"Satz Nummer {i} erzählt vom Fluss im Tal. " for i in range(200)]
    text = "".join(sentences).strip()
    chunks = sentence_chunks(text)
    assert "".join(chunks) == text and len(chunks) > 1
    assert all(len(c) <= TRANSLATE_CHUNK and c.rstrip().endswith(".") for c in chunks)
    assert sentence_chunks("Eins.\nZwei! Drei?", 8) == ["Eins.\n", "Zwei! ", "Drei?"]
    _translations(
        tmp_path / "p.jsonl",
        [{"id": "de-en-1", "lang": "en", "source_lang": "de", "pair": "de-en",
          "source": text, "translation": "The river.", "score": 5}],
    )  # fmt: skip
    with FakeLLMServer(echo_judge) as server:
        assert (
            _judge_task(server, tmp_path / "p.jsonl", "literary-translation", tmp_path / "o.jsonl")
            == 0
        )
        translated = _translated(server.requests)
        checklist_in = [
            b["messages"][-1]["content"] for b in server.requests
            if b["messages"][-1]["content"].rstrip().endswith("Checklist:")
            and "Satz Nummer 0 " in b["messages"][-1]["content"]
        ]  # fmt: skip
    assert sorted(translated) == sorted(c.strip() for c in chunks)  # sent concurrently
    assert sentences[-1].strip() in checklist_in[0], "the end of the text is translated too"


def test_a_bad_source_language_is_named(tmp_path, capsys):
    _translations(
        tmp_path / "p.jsonl",
        [{"id": "x-1", "lang": "en", "source_lang": "german", "source": "Der Fluss.",
          "translation": "The river.", "score": 5}],
    )  # fmt: skip
    assert _judge_task(FakeLLMServer(echo_judge), tmp_path / "p.jsonl", "literary-translation",
                       tmp_path / "o.jsonl") == 2  # fmt: skip
    assert "source_lang" in capsys.readouterr().err


# -- zero-shot and annotation guidelines (MEMERAG's and mFACE's setups) --------------------------


def test_guidelines_prompt_carries_every_memerag_error_type(fr):
    root, labels = fr
    with FakeLLMServer(ScriptedBaselines(labels)) as server:
        assert judge(server, root / "fr.jsonl", "guidelines", root / "g.jsonl") == 0
        assert judge(server, root / "fr.jsonl", "zero-shot", root / "z.jsonl") == 0
        prompts = [b["messages"][-1]["content"] for b in server.requests]
    guided = [p for p in prompts if "Guidelines:" in p]
    assert len(guided) == 4 and len(prompts) == 8  # one call per sample and method
    for error in ("adds information", "contradicts", "mis-references", "shifts nuance",
                  "reasons wrongly", "opinion", "blends separate facts",
                  "particular aspect the question asks about"):  # fmt: skip
        assert all(error in p for p in guided), error
    zero = [p for p in prompts if "Guidelines:" not in p]
    assert all("grounded in the passages" in p and p.endswith("only.") for p in zero)


def test_summary_guidelines_carry_mfaces_attribution_test():
    from ucsj.tasks import load_task

    guidelines = " ".join(load_task("summary-faithfulness").guidelines.split())
    assert '"the article says that ..."' in guidelines and "garbled" in guidelines


# -- CheckEval ----------------------------------------------------------------------------------


def test_checkeval_asks_one_call_per_aspect_with_its_definition(fr):
    from ucsj.tasks import load_task

    root, labels = fr
    with FakeLLMServer(ScriptedBaselines(labels)) as server:
        assert judge(server, root / "fr.jsonl", "checkeval", root / "c.jsonl") == 0
        prompts = [b["messages"][-1]["content"] for b in server.requests]
    aspects = load_task("rag-faithfulness").checkeval
    assert len(prompts) == 4 * len(aspects)
    for name, definition, questions in aspects:
        asked = [p for p in prompts if f"Aspect: {name} - {definition}" in p]
        assert len(asked) == 4 and all(f"Q{len(questions)}. {questions[-1]}" in p for p in asked)
    assert all("Q1: [Yes or No]" in p for p in prompts)


def checklist_writer(body: dict) -> Reply:
    prompt = body["messages"][-1]["content"]
    aspect = re.search(r"^Aspect: (.*?) - ", prompt, re.M).group(1)
    if "from angles the seed questions do not cover" in prompt:
        return Reply(
            text=f"1. Does it avoid {aspect} error one?\n2. Does it avoid {aspect} error two?"
        )
    if "Break each seed question down" in prompt:
        return Reply(text=f"1. Is the {aspect} detail right?\n2. Is it good, yes or no?")
    if "Keep only the candidates" in prompt:  # drops the vague one
        kept = [q for q in re.findall(r"^\d+\. (.*)$", prompt, re.M) if "yes or no" not in q]
        return Reply(text="\n".join(f"{i}. {q}" for i, q in enumerate(kept, start=1)))
    raise AssertionError(prompt)


def test_gen_checklist_expands_filters_caches_and_is_editable(fr, capsys):
    root, labels = fr
    out = root / "checklist.json"
    with FakeLLMServer(checklist_writer) as server:
        common = ["--task", "rag-faithfulness", "--base-url", server.base_url,
                  "--cache-dir", str(root / "gen-cache")]  # fmt: skip
        assert ucsj("gen-checklist", "-o", str(out), *common) == 0
        calls = server.count
        assert ucsj("gen-checklist", "-o", str(root / "again.json"), *common) == 0
        assert server.count == calls, "a rerun is served from the cache"
    assert calls == 3 * 3  # diversify, elaborate, filter for each of three aspects
    content = json.loads(out.read_text())
    assert content["format"] == "ucsj.checkeval/1" and content["task"] == "rag-faithfulness"
    attribution = content["aspects"][0]
    assert attribution["name"] == "Attribution" and attribution["filtered"] is True
    assert attribution["definition"].startswith("whether each claim")
    assert len(attribution["questions"]) == 2 + 2 + 1  # seeds, diversified, elaborated
    assert not any("yes or no" in q for q in attribution["questions"])
    # edited by hand: one aspect with one question
    content["aspects"] = [{**attribution, "questions": ["Is the year right?"]}]
    out.write_text(json.dumps(content))
    with FakeLLMServer(ScriptedBaselines(labels)) as server:
        assert judge(server, root / "fr.jsonl", "checkeval", root / "c.jsonl",
                     "--checklist", str(out)) == 0  # fmt: skip
        prompts = [b["messages"][-1]["content"] for b in server.requests]
    assert len(prompts) == 4 and all("Q1. Is the year right?" in p for p in prompts)
    assert all(len(r["items"]) == 1 for r in rows(root / "c.jsonl"))
    # calibrated on labelled data: the threshold is chosen with the same checklist
    with FakeLLMServer(ScriptedBaselines(labels)) as server:
        extra = ["--checklist", str(out), "--calibrate-on", str(root / "fr.jsonl")]
        assert judge(server, root / "fr.jsonl", "checkeval", root / "cc.jsonl", *extra) == 0
        prompts = [b["messages"][-1]["content"] for b in server.requests]
    assert prompts and all("Q1. Is the year right?" in p for p in prompts)
    content["task"] = "summary-faithfulness"
    out.write_text(json.dumps(content))
    with FakeLLMServer(ScriptedBaselines(labels)) as server:
        code = judge(
            server, root / "fr.jsonl", "checkeval", root / "x.jsonl", "--checklist", str(out)
        )
    assert code == 2 and "not 'rag-faithfulness'" in capsys.readouterr().err


def test_checkeval_aspects_take_a_list_or_a_definition_with_questions():
    from ucsj.errors import InputError
    from ucsj.tasks import task_from_toml

    head = 'name = "t"\ndescription = "d"\nquestion = "q?"\n[fields]\nsource = "s"\noutput = "o"\n'
    task = task_from_toml(
        head + '[checkeval]\n"A" = ["Is it a?"]\n'
        '[checkeval.B]\ndefinition = """\nwhether b\nholds"""\nquestions = ["Is it b?"]\n',
        "t.toml",
    )
    assert task.checkeval == (("A", "", ("Is it a?",)), ("B", "whether b holds", ("Is it b?",)))
    with pytest.raises(InputError, match="definition must be a string"):
        task_from_toml(head + '[checkeval.B]\ndefinition = 3\nquestions = ["Is it b?"]\n', "t")
