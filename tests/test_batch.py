"""Batch round trips (--cache collect, cache import-batch, batch run) and --shard."""

from __future__ import annotations

import json

import pytest
from conftest import ucsj
from fakebatch import FakeBatchServer, answer_pending
from fakeserver import FakeLLMServer
from synth import ScriptedJudge, write_dataset

from ucsj.errors import RequestsPending
from ucsj.llm import CacheMode, ChatRequest, ResponseCache
from ucsj.llm.batch import batch_line, import_batch
from ucsj.llm.batch_api import BatchSettings, noted_batch_id, run_batch
from ucsj.shards import Shard, parse_shard

CRITERIA = {
    "task": "rag-faithfulness",
    "concepts": [
        {
            "id": "c1",
            "name": "Attribution",
            "questions": [
                {"id": "c1.q1", "text": "Does the answer satisfy attribution check 1?"},
                {"id": "c1.q2", "text": "Does the answer satisfy attribution check 2?"},
            ],
        },
        {
            "id": "c2",
            "name": "Style",
            "questions": [{"id": "c2.q1", "text": "Does the answer satisfy style check 1?"}],
        },
    ],
}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """24 English samples, a scripted judge on the loopback server, and a direct run's outputs
    (criteria, scores) recorded into their own cache."""
    root = tmp_path_factory.mktemp("batch")
    labels = write_dataset(root / "en.jsonl", "en", 24)
    (root / "criteria.json").write_text(json.dumps(CRITERIA))
    with FakeLLMServer(ScriptedJudge(labels)) as server:
        direct = ["--base-url", server.base_url, "--model", "judge-2025-01-01"]
        direct += ["--cache-dir", str(root / "direct-cache")]
        assert ucsj("gen", "--task", "rag-faithfulness", "-o", str(root / "gen.json"), *direct) == 0
        assert score(root, "direct.jsonl", direct) == 0
        yield root, server, labels


def score(root, out, options, *extra) -> int:
    return ucsj(
        "score",
        str(root / "en.jsonl"),
        "--criteria",
        str(root / "criteria.json"),
        "-o",
        str(root / out),
        *options,
        *extra,
    )


def collect_options(root, cache, pending="pending.jsonl"):
    # no server is named: a collect run never connects
    return [
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "judge-2025-01-01",
        "--cache-dir",
        str(root / cache),
        "--cache",
        "collect",
        "--pending",
        str(root / pending),
    ]


def read_lines(path):
    return [json.loads(t) for t in path.read_text(encoding="utf-8").splitlines() if t.strip()]


def test_batch_line_is_the_batch_api_input_format():
    request = ChatRequest.chat("m-2024-01-01", [("user", "Bonjour ?")], max_tokens=3)
    line = json.loads(batch_line(request))
    assert line == {
        "custom_id": request.key,
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": request.body(),
    }
    assert "Bonjour ?" in batch_line(request)  # UTF-8, not escaped


def test_collect_import_round_trip_recollects_failed_lines(world, capsys):
    root, server, _ = world
    options = collect_options(root, "round-trip-cache")
    before = server.count
    assert score(root, "collected.jsonl", options) == 4
    assert server.count == before  # nothing was sent
    assert not (root / "collected.jsonl").exists()  # no output file while pending
    assert "pending" in capsys.readouterr().err
    pending = read_lines(root / "pending.jsonl")
    assert len(pending) == 24 * 2  # two concept calls per sample, each written once
    assert len({line["custom_id"] for line in pending}) == len(pending)
    for line in pending:
        assert line["method"] == "POST" and line["url"] == "/v1/chat/completions"
        assert (
            ChatRequest.chat(
                line["body"]["model"],
                [(m["role"], m["content"]) for m in line["body"]["messages"]],
                max_tokens=line["body"]["max_tokens"],
                top_logprobs=line["body"]["top_logprobs"],
            ).key
            == line["custom_id"]
        )

    # the engine answers; three lines fail (two HTTP errors, one error object)
    failing = {3: "http", 10: "error", 17: "http"}
    failed = answer_pending(
        root / "pending.jsonl", root / "answers.jsonl", server.base_url, lambda n, k: failing.get(n)
    )
    cache = ["--cache-dir", str(root / "round-trip-cache")]
    code = ucsj(
        "cache",
        "import-batch",
        str(root / "answers.jsonl"),
        "--requests",
        str(root / "pending.jsonl"),
        *cache,
    )
    assert code == 3
    err = capsys.readouterr().err
    for custom_id in failed:
        assert custom_id in err
    assert "HTTP 500: overloaded" in err and "batch_expired: not processed" in err
    with ResponseCache(root / "round-trip-cache") as store:
        assert len(store) == 48 - 3
        assert all(k not in store for k in failed)
        entry = store.get(pending[0]["custom_id"])
        assert "response_digest" in entry  # stored as a run stores, with its integrity digest
        meta = entry["meta"]
        assert meta["endpoint"] == "batch" and meta["request_id"].startswith("req_")

    # the next collect asks for exactly the failed ones
    assert score(root, "collected.jsonl", options) == 4
    assert sorted(line["custom_id"] for line in read_lines(root / "pending.jsonl")) == sorted(
        failed
    )
    answer_pending(root / "pending.jsonl", root / "answers2.jsonl", server.base_url)
    code = ucsj(
        "cache",
        "import-batch",
        str(root / "answers2.jsonl"),
        "--requests",
        str(root / "pending.jsonl"),
        *cache,
    )
    assert code == 0
    assert score(root, "collected.jsonl", options) == 0
    assert read_lines(root / "pending.jsonl") == []  # nothing pending is written as such
    direct = (root / "direct.jsonl").read_bytes()
    assert (root / "collected.jsonl").read_bytes() == direct
    replay = ["--cache", "replay", *cache, "--model", "judge-2025-01-01"]
    assert score(root, "replayed.jsonl", replay) == 0
    assert (root / "replayed.jsonl").read_bytes() == direct


def test_import_batch_rejects_lines_that_do_not_match_their_request(server, tmp_path):
    request = ChatRequest.chat("judge-2025-01-01", [("user", "Is it?")], max_tokens=2)
    other = ChatRequest.chat("judge-2025-01-01", [("user", "Is it not?")], max_tokens=2)
    pending = tmp_path / "pending.jsonl"
    # a request whose body was edited after collection no longer hashes to its custom_id
    forged = json.loads(batch_line(other))
    forged["body"]["max_tokens"] = 9
    pending.write_text(batch_line(request) + json.dumps(forged) + "\n")
    answers = tmp_path / "answers.jsonl"
    answer_pending(pending, answers, server.base_url)
    with answers.open("a") as out:
        out.write("{not json\n")
        out.write(json.dumps({"custom_id": "f" * 64, "response": {"status_code": 200}}) + "\n")
    with ResponseCache(tmp_path / "cache") as store:
        result = import_batch(store, answers, pending)
        assert result.stored == 1 and store.get(request.key) is not None
        reasons = sorted(reason for _, _, reason in result.failed)
        assert len(reasons) == 3
        assert "invalid JSON" in reasons
        assert any("does not hash to this custom_id" in r for r in reasons)
        assert any("no request with this custom_id" in r for r in reasons)
        # importing again stores nothing new and keeps the first recording
        again = import_batch(store, answers, pending)
        assert again.stored == 0 and again.known == 1


def test_a_multi_step_method_is_collected_over_several_rounds(world):
    root, server, _ = world
    options = collect_options(root, "gen-cache", "gen-pending.jsonl")
    cache = ["--cache-dir", str(root / "gen-cache")]
    rounds = []
    for _ in range(5):
        code = ucsj("gen", "--task", "rag-faithfulness", "-o", str(root / "gen2.json"), *options)
        if code == 0:
            break
        assert code == 4 and not (root / "gen2.json").exists()
        rounds.append(len(read_lines(root / "gen-pending.jsonl")))
        answer_pending(root / "gen-pending.jsonl", root / "gen-answers.jsonl", server.base_url)
        assert (
            ucsj(
                "cache",
                "import-batch",
                str(root / "gen-answers.jsonl"),
                "--requests",
                str(root / "gen-pending.jsonl"),
                *cache,
            )
            == 0
        )
    assert rounds == [1, 4]  # the concepts first, then one questions call per concept
    assert (root / "gen2.json").read_bytes() == (root / "gen.json").read_bytes()


def test_ce_judge_is_collected_to_completion(world):
    from test_methods import ScriptedBaselines

    root, _, labels = world
    with FakeLLMServer(ScriptedBaselines(labels)) as server:
        _ce_judge_rounds(root, server)


def _ce_judge_rounds(root, server):
    direct = ["--base-url", server.base_url, "--model", "judge-2025-01-01"]
    direct += ["--cache-dir", str(root / "ce-direct-cache")]
    judge = ["judge", str(root / "en.jsonl"), "--method", "ce-judge", "--task", "rag-faithfulness"]
    assert ucsj(*judge, "-o", str(root / "ce-direct.jsonl"), *direct) == 0
    options = collect_options(root, "ce-cache", "ce-pending.jsonl")
    rounds = 0
    while (code := ucsj(*judge, "-o", str(root / "ce.jsonl"), *options)) == 4:
        rounds += 1
        assert rounds < 10
        answer_pending(root / "ce-pending.jsonl", root / "ce-answers.jsonl", server.base_url)
        ucsj(
            "cache",
            "import-batch",
            str(root / "ce-answers.jsonl"),
            "--requests",
            str(root / "ce-pending.jsonl"),
            "--cache-dir",
            str(root / "ce-cache"),
        )
    assert code == 0 and rounds >= 2
    assert (root / "ce.jsonl").read_bytes() == (root / "ce-direct.jsonl").read_bytes()


def test_collect_needs_a_pending_file(world, capsys):
    root, _, _ = world
    options = collect_options(root, "c")[:-2]
    assert score(root, "x.jsonl", options) == 2
    assert "--cache collect needs --pending" in capsys.readouterr().err


def test_collect_to_standard_output_prints_nothing_while_pending(world, capsys):
    root, _, _ = world
    code = ucsj(
        "score",
        str(root / "en.jsonl"),
        "--criteria",
        str(root / "criteria.json"),
        *collect_options(root, "stdout-cache", "stdout-pending.jsonl"),
    )
    assert code == 4
    assert capsys.readouterr().out == ""


# -- shards ------------------------------------------------------------------------------------


def test_shard_of_an_id_is_stable_and_parsed_strictly():
    # fixed values: a change here would split existing shard runs differently
    assert [Shard(0, 4).takes(f"en-{i:03d}") for i in range(8)] == [
        Shard(0, 4).takes(f"en-{i:03d}") for i in range(8)
    ]
    assert [next(k for k in range(4) if Shard(k, 4).takes(i)) for i in ("a", "b", "en-000")] == [
        _expected_shard("a"),
        _expected_shard("b"),
        _expected_shard("en-000"),
    ]
    assert parse_shard("2/5") == Shard(2, 5)
    for bad in ("5/5", "1", "a/b", "0/0"):
        with pytest.raises(Exception, match="--shard"):
            parse_shard(bad)


def _expected_shard(sample_id: str) -> int:
    import hashlib

    return int(hashlib.sha256(sample_id.encode()).hexdigest()[:16], 16) % 4


def test_shards_merged_replay_byte_identical_to_one_machine(world):
    root, server, _ = world
    taken = []
    merged = ["--cache-dir", str(root / "merged-cache")]
    for k in range(3):
        options = ["--base-url", server.base_url, "--model", "judge-2025-01-01"]
        options += ["--cache-dir", str(root / f"shard{k}-cache"), "--shard", f"{k}/3"]
        assert score(root, f"shard{k}.jsonl", options) == 0
        taken += [line["id"] for line in read_lines(root / f"shard{k}.jsonl")]
        export = root / f"shard{k}.cache.jsonl"
        assert (
            ucsj("cache", "export", "-o", str(export), "--cache-dir", str(root / f"shard{k}-cache"))
            == 0
        )
        assert ucsj("cache", "import", str(export), *merged) == 0
    assert sorted(taken) == [f"en-{i:03d}" for i in range(24)]  # each sample in one shard
    assert all(len(read_lines(root / f"shard{k}.jsonl")) < 24 for k in range(3))
    replay = ["--cache", "replay", *merged, "--model", "judge-2025-01-01"]
    assert score(root, "merged.jsonl", replay) == 0
    assert (root / "merged.jsonl").read_bytes() == (root / "direct.jsonl").read_bytes()


def test_judge_takes_its_shard_only(world):
    root, server, _ = world
    options = ["--base-url", server.base_url, "--model", "judge-2025-01-01"]
    options += ["--cache-dir", str(root / "judge-shard-cache")]
    judge = ["judge", str(root / "en.jsonl"), "--method", "zero-shot", "--task", "rag-faithfulness"]
    ids = []
    for k in range(2):
        assert ucsj(*judge, "--shard", f"{k}/2", "-o", str(root / f"zs{k}.jsonl"), *options) == 0
        ids.append({line["id"] for line in read_lines(root / f"zs{k}.jsonl")})
        assert all(Shard(k, 2).takes(i) for i in ids[-1])
    assert not ids[0] & ids[1] and len(ids[0] | ids[1]) == 24


# -- the Files and Batches API -----------------------------------------------------------------


def test_batch_run_resumes_an_interrupted_poll_and_imports(world, tmp_path, monkeypatch):
    root, _, labels = world
    options = collect_options(root, "api-cache", "api-pending.jsonl")
    assert score(root, "api.jsonl", options) == 4
    pending = root / "api-pending.jsonl"
    ids = [line["custom_id"] for line in read_lines(pending)]
    with FakeBatchServer(ScriptedJudge(labels), polls_to_finish=3, fail_ids={ids[5]}) as api:
        settings = BatchSettings(api.base_url, api_key="sk-test-secret", poll_s=0.0)
        output = tmp_path / "out.jsonl"
        polls = []

        def interrupt(_delay):
            polls.append(_delay)
            if len(polls) == 1:
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            run_batch(pending, output, settings, sleep=interrupt)
        assert not output.exists() and noted_batch_id(output) == "batch_1"
        outcome = run_batch(pending, output, settings, sleep=lambda _: None)
        assert api.state.uploads == 1 and len(api.state.batches) == 1  # resumed, not redone
        assert outcome.batch_id == "batch_1" and outcome.status == "completed"
        assert (outcome.completed, outcome.failed, outcome.lines) == (47, 1, 48)
        assert set(api.state.auth) == {"Bearer sk-test-secret"}
    assert (
        "sk-test-secret" not in output.read_text() + (tmp_path / "out.jsonl.batch.json").read_text()
    )
    cache = ["--cache-dir", str(root / "api-cache")]
    assert ucsj("cache", "import-batch", str(output), "--requests", str(pending), *cache) == 3
    with ResponseCache(root / "api-cache") as store:
        assert store.get(ids[0])["meta"]["batch_id"] == "batch_1"
    # the failed line is asked for again; answered, the run completes as a direct one would
    assert score(root, "api.jsonl", options) == 4
    assert [line["custom_id"] for line in read_lines(pending)] == [ids[5]]
    with FakeBatchServer(ScriptedJudge(labels), polls_to_finish=1) as api:
        run_batch(pending, tmp_path / "out2.jsonl", BatchSettings(api.base_url, poll_s=0.0))
    assert (
        ucsj(
            "cache",
            "import-batch",
            str(tmp_path / "out2.jsonl"),
            "--requests",
            str(pending),
            *cache,
        )
        == 0
    )
    assert score(root, "api.jsonl", options) == 0
    assert (root / "api.jsonl").read_bytes() == (root / "direct.jsonl").read_bytes()


def test_library_collect_raises_requests_pending(world, make_settings, tmp_path):
    from ucsj.criteria import load_criteria
    from ucsj.scoring import score_file
    from ucsj.tasks import load_task

    root, _, _ = world
    settings = make_settings(
        "http://127.0.0.1:9/v1", cache_mode=CacheMode.COLLECT, pending=tmp_path / "p.jsonl"
    )
    criteria = load_criteria(root / "criteria.json")
    with pytest.raises(RequestsPending) as caught:
        score_file(
            root / "en.jsonl", criteria, load_task("rag-faithfulness"), tmp_path / "o", settings
        )
    assert caught.value.count == 48 and caught.value.exit_code == 4
    assert not (tmp_path / "o").exists()


def test_fit_on_a_data_file_collects_its_scoring(world):
    root, _, _ = world
    options = collect_options(root, "fit-cache", "fit-pending.jsonl")
    fit = ["fit", "--train", str(root / "en.jsonl"), "--criteria", str(root / "criteria.json")]
    assert ucsj(*fit, "-o", str(root / "judge.skops"), *options) == 4
    assert not (root / "judge.skops").exists()
    assert len(read_lines(root / "fit-pending.jsonl")) == 48


def test_the_pending_file_never_replaces_an_input(world, capsys):
    root, _, _ = world
    before = (root / "en.jsonl").read_bytes()
    options = collect_options(root, "c2", "en.jsonl")
    assert score(root, "x.jsonl", options) == 2
    assert "is also an input" in capsys.readouterr().err
    assert (root / "en.jsonl").read_bytes() == before


def test_an_interrupted_collect_leaves_no_pending_file(tmp_path):
    from ucsj.llm.batch import PendingWriter

    writer = PendingWriter(tmp_path / "p.jsonl")
    writer.add(ChatRequest.chat("m-2024-01-01", [("user", "Hi")], max_tokens=1))
    writer.discard()
    assert list(tmp_path.iterdir()) == []
