"""gen -> score -> fit -> predict -> report through the CLI and the loopback server."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest
from conftest import ucsj
from fakeserver import FakeLLMServer
from synth import ScriptedJudge, write_dataset

from ucsj.criteria import load_criteria
from ucsj.metrics import balanced_accuracy
from ucsj.scores import read_scores
from ucsj.transfer import fit_judge, predict_records


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """Data in en (train), fr and de; a server playing the judge; one shared cache."""
    root = tmp_path_factory.mktemp("pipeline")
    labels = {}
    labels |= write_dataset(root / "en.jsonl", "en", 80)
    labels |= write_dataset(root / "fr.jsonl", "fr", 100, with_lang=False)
    labels |= write_dataset(root / "de.jsonl", "de", 100)
    server = FakeLLMServer(ScriptedJudge(labels))
    with server:
        yield root, server


@pytest.fixture(scope="module")
def scored(workspace):
    root, server = workspace
    common = [
        "--base-url",
        server.base_url,
        "--cache-dir",
        str(root / "cache"),
        "--model",
        "judge-2025-01-01",
        "--concurrency",
        "8",
    ]
    assert (
        ucsj("gen", "--task", "rag-faithfulness", "-o", str(root / "criteria.json"), *common) == 0
    )
    for lang in ("en", "de"):
        assert (
            ucsj(
                "score",
                str(root / f"{lang}.jsonl"),
                "--criteria",
                str(root / "criteria.json"),
                "-o",
                str(root / f"{lang}.scores.jsonl"),
                *common,
            )
            == 0
        )
    assert (
        ucsj(
            "score",
            str(root / "fr.jsonl"),
            "--criteria",
            str(root / "criteria.json"),
            "--lang",
            "fr",
            "-o",
            str(root / "fr.scores.jsonl"),
            *common,
        )
        == 0
    )
    return root, server, common


def test_gen_writes_ids_and_fingerprint(scored):
    root, _, _ = scored
    criteria = json.loads((root / "criteria.json").read_text())
    assert criteria["format"] == "ucsj.criteria/1" and criteria["task"] == "rag-faithfulness"
    assert [c["id"] for c in criteria["concepts"]] == ["c1", "c2", "c3", "c4"]
    assert [q["id"] for q in criteria["concepts"][0]["questions"]] == ["c1.q1", "c1.q2", "c1.q3"]
    assert criteria["generated_by"]["gen"] == "per-concept"
    assert criteria["fingerprint"].startswith("sha256:")


def test_scores_stream_in_input_order_with_z_and_s(scored):
    root, _, _ = scored
    rows = [json.loads(line) for line in (root / "fr.scores.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == [f"fr-{i:03d}" for i in range(100)]
    first = rows[0]
    assert first["lang"] == "fr" and first["scoring"] == "per-concept"
    assert len(first["z"]) == 12 and set(first["s"]) == {"c1", "c2", "c3", "c4"}
    # s is the mean of the concept's z values; the signal concept follows the label
    c1 = [first["z"][f"c1.q{i}"] for i in (1, 2, 3)]
    assert first["s"]["c1"] == pytest.approx(sum(c1) / 3, abs=1e-6)
    assert (first["s"]["c1"] > 0.5) == bool(first["label"])
    assert first["usage"]["calls"] == 4 and set(first["answers"]) == {"c1", "c2", "c3", "c4"}


def test_rerun_sends_nothing_and_is_byte_identical(scored):
    root, server, common = scored
    before = server.count
    criteria_bytes = (root / "criteria.json").read_bytes()
    scores_bytes = (root / "de.scores.jsonl").read_bytes()
    assert (
        ucsj("gen", "--task", "rag-faithfulness", "-o", str(root / "criteria.json"), *common) == 0
    )
    assert (
        ucsj(
            "score",
            str(root / "de.jsonl"),
            "--criteria",
            str(root / "criteria.json"),
            "-o",
            str(root / "de.scores.jsonl"),
            *common,
        )
        == 0
    )
    assert server.count == before
    assert (root / "criteria.json").read_bytes() == criteria_bytes
    assert (root / "de.scores.jsonl").read_bytes() == scores_bytes


def test_english_judge_transfers_to_other_languages(scored, capsys):
    root, _, _ = scored
    assert (
        ucsj(
            "fit",
            "--train",
            str(root / "en.scores.jsonl"),
            "--criteria",
            str(root / "criteria.json"),
            "-o",
            str(root / "judge.skops"),
        )
        == 0
    )
    assert "chosen" in capsys.readouterr().out
    for lang in ("fr", "de"):
        assert (
            ucsj(
                "predict",
                str(root / f"{lang}.scores.jsonl"),
                "--judge",
                str(root / "judge.skops"),
                "-o",
                str(root / f"{lang}.preds.jsonl"),
            )
            == 0
        )
    assert (
        ucsj(
            "report",
            str(root / "fr.preds.jsonl"),
            str(root / "de.preds.jsonl"),
            "--json",
            str(root / "report.json"),
            "--gate",
            "ba>=0.9",
        )
        == 0
    )
    report = json.loads((root / "report.json").read_text())
    (method,) = report["methods"]
    for lang in ("fr", "de"):
        assert report["methods"][method][lang]["ba"] >= 0.9
        assert report["methods"][method][lang]["n"] == 100


def test_fit_and_predict_are_byte_identical(scored):
    root, _, _ = scored
    outputs = []
    for run in (1, 2):
        judge, preds = root / f"judge{run}.joblib", root / f"preds{run}.jsonl"
        assert (
            ucsj(
                "fit",
                "--train",
                str(root / "en.scores.jsonl"),
                "--criteria",
                str(root / "criteria.json"),
                "--module",
                "mlp",
                "-o",
                str(judge),
            )
            == 0
        )
        assert (
            ucsj("predict", str(root / "fr.scores.jsonl"), "--judge", str(judge), "-o", str(preds))
            == 0
        )
        outputs.append((judge.read_bytes(), preds.read_bytes()))
    assert outputs[0] == outputs[1]


def test_shuffled_training_labels_give_chance(scored):
    """Trained on permuted labels, the judge is at chance on average over permutations.

    One permutation can still align with the signal by luck (the signal splits the data so
    cleanly that any weight on it splits the targets), so the check averages 30 of them.
    """
    root, _, _ = scored
    criteria = load_criteria(root / "criteria.json")
    train = read_scores(root / "en.scores.jsonl")
    targets = read_scores(root / "fr.scores.jsonl") + read_scores(root / "de.scores.jsonl")
    truth = [r.label for r in targets]

    def target_ba(records):
        judge = fit_judge(records, criteria, module="logreg")
        preds = [row["pred"] for row in predict_records(judge, targets)]
        return balanced_accuracy(truth, preds)

    assert target_ba(train) >= 0.9
    rng = random.Random(7)
    scores = []
    for _ in range(30):
        labels = [r.label for r in train]
        rng.shuffle(labels)
        scores.append(target_ba([replace(r, label=y) for r, y in zip(train, labels, strict=False)]))
    assert abs(sum(scores) / len(scores) - 0.5) <= 0.1


def test_predict_refuses_scores_from_other_criteria(scored, capsys):
    root, _, _ = scored
    rows = [json.loads(line) for line in (root / "fr.scores.jsonl").read_text().splitlines()]
    rows[3]["criteria"] = "sha256:" + "0" * 64
    other = root / "other.scores.jsonl"
    other.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert (
        ucsj(
            "predict",
            str(other),
            "--judge",
            str(root / "judge.skops"),
            "-o",
            str(root / "never.jsonl"),
        )
        == 2
    )
    assert "fr-003" in capsys.readouterr().err
    assert not (root / "never.jsonl").exists()


def test_failed_gate_exits_1_with_one_line(scored, capsys):
    root, _, _ = scored
    code = ucsj(
        "report",
        str(root / "fr.preds.jsonl"),
        "--gate",
        "pass_rate[fr]>=0.9",
        "--junit",
        str(root / "junit.xml"),
    )
    assert code == 1
    err = capsys.readouterr().err
    assert "gate FAILED: pass_rate[fr]>=0.9 for ucs-" in err
    assert "<failure" in (root / "junit.xml").read_text()


@pytest.mark.parametrize("scoring", ["joint", "per-criterion"])
def test_other_granularities(scored, scoring):
    root, _server, common = scored
    out = root / f"en.{scoring}.jsonl"
    assert (
        ucsj(
            "score",
            str(root / "en.jsonl"),
            "--criteria",
            str(root / "criteria.json"),
            "--scoring",
            scoring,
            "-o",
            str(out),
            *common,
        )
        == 0
    )
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    calls = {"joint": 1, "per-criterion": 12}[scoring]
    assert all(r["usage"]["calls"] == calls and r["scoring"] == scoring for r in rows)
    # the signal concept's answers agree with the label in every row
    assert all((r["s"]["c1"] > 0.5) == bool(r["label"]) for r in rows)
    if scoring == "per-criterion":
        assert all(0 < v < 1 for r in rows for v in r["z"].values()), "P(yes) from logprobs"


def test_decomposition_reads_server_time_from_the_cache(scored):
    root, _, common = scored
    cache = common[common.index("--cache-dir") + 1]
    for scoring in ("joint", "per-concept"):
        for lang in ("en", "fr"):
            out = root / f"{lang}.dec.{scoring}.jsonl"
            extra = ["--lang", "fr"] if lang == "fr" else []
            assert (
                ucsj(
                    "score",
                    str(root / f"{lang}.jsonl"),
                    "--criteria",
                    str(root / "criteria.json"),
                    "--scoring",
                    scoring,
                    "-o",
                    str(out),
                    *extra,
                    *common,
                )
                == 0
            )
    runs = [
        f"{s}={root / 'criteria.json'},{root / f'en.dec.{s}.jsonl'},{root / f'fr.dec.{s}.jsonl'}"
        for s in ("joint", "per-concept")
    ]
    assert (
        ucsj(
            "analyze",
            "decomposition",
            "--run",
            runs[0],
            "--run",
            runs[1],
            "--cache-dir",
            cache,
            "--module",
            "logreg",
            "--json",
            str(root / "dec.json"),
            "--plot",
            str(root / "dec.png"),
        )
        == 0
    )
    result = json.loads((root / "dec.json").read_text())
    assert (
        result["joint"]["calls_per_sample"] == 1 and result["per-concept"]["calls_per_sample"] == 4
    )
    for variant in result.values():
        assert variant["llm_seconds_per_sample"] > 0  # the loopback server's recorded latency
        assert variant["ba_avg"] >= 0.9
    rows = [json.loads(x) for x in (root / "fr.dec.joint.jsonl").read_text().splitlines()]
    assert all(set(r["keys"]) == {"all"} and len(r["keys"]["all"]) == 64 for r in rows)


def test_typical_use_as_spelled(scored):
    """`ucsj score data.jsonl --lang fr` and `ucsj fit --train en.jsonl`, run where
    criteria.json lives: scores go to standard output, the judge to judge.skops."""
    import os
    import subprocess
    import sys

    root, server, common = scored
    env = {
        **os.environ,
        "OPENAI_BASE_URL": server.base_url,
        "UCSJ_CACHE_DIR": common[common.index("--cache-dir") + 1],
        "UCSJ_MODEL": common[common.index("--model") + 1],
    }

    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "ucsj", *args],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    before = server.count
    scored_fr = run("score", "fr.jsonl", "--lang", "fr")
    assert scored_fr.returncode == 0, scored_fr.stderr
    assert scored_fr.stdout == (root / "fr.scores.jsonl").read_text()
    assert "into standard output" in scored_fr.stderr
    (root / "judge.skops").unlink(missing_ok=True)
    fitted = run("fit", "--train", "en.jsonl")
    assert fitted.returncode == 0, fitted.stderr
    assert (root / "judge.skops").is_file()
    assert server.count == before, "both were served from the cache"
