"""Cache commands, fixtures, sharing between processes, replay through the CLI, secrets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from conftest import ROOT, ucsj
from fakeserver import FakeLLMServer
from synth import ScriptedJudge, write_dataset

from ucsj.llm import ChatRequest, ResponseCache
from ucsj.llm.cache import make_entry


def _entry(text: str) -> dict:
    request = ChatRequest.chat("m-2024-01-01", [("user", text)], max_tokens=4)
    response = {
        "choices": [{"message": {"role": "assistant", "content": "Yes"}, "finish_reason": "stop"}],
        "model": "m-2024-01-01",
    }
    return make_entry(request.key_material(), response, {"requested_model": "m-2024-01-01"})


def test_export_import_roundtrip_is_stable_and_verified(tmp_path, capsys):
    with ResponseCache(tmp_path / "a") as cache:
        for text in ("b", "a", "c"):
            cache.put(_entry(text))
    first, second = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    assert ucsj("cache", "export", "-o", str(first), "--cache-dir", str(tmp_path / "a")) == 0
    assert ucsj("cache", "import", str(first), "--cache-dir", str(tmp_path / "b")) == 0
    assert ucsj("cache", "export", "-o", str(second), "--cache-dir", str(tmp_path / "b")) == 0
    assert first.read_bytes() == second.read_bytes()
    keys = [json.loads(x)["key"] for x in first.read_text().splitlines()]
    assert keys == sorted(keys) and len(keys) == 3
    assert ucsj("cache", "verify", "--cache-dir", str(tmp_path / "b")) == 0
    assert "3 entries verified" in capsys.readouterr().out
    assert ucsj("cache", "stats", "--cache-dir", str(tmp_path / "b")) == 0
    assert "m-2024-01-01: 3" in capsys.readouterr().out


def test_import_refuses_a_tampered_fixture(tmp_path, capsys):
    entry = _entry("x")
    entry["request"]["messages"][0]["content"] = "edited"
    (tmp_path / "bad.jsonl").write_text(json.dumps(entry) + "\n")
    assert (
        ucsj("cache", "import", str(tmp_path / "bad.jsonl"), "--cache-dir", str(tmp_path / "c"))
        == 2
    )
    err = capsys.readouterr().err
    assert "bad.jsonl:1" in err and "does not match" in err


def test_verify_reports_an_entry_whose_key_does_not_match(tmp_path, capsys):
    entry = _entry("x")
    with ResponseCache(tmp_path / "c") as cache:
        cache.put(entry)
        tampered = dict(entry, request={**entry["request"], "max_tokens": 99})
        cache._store.set(entry["key"], json.dumps(tampered))  # corruption on disk
    assert ucsj("cache", "verify", "--cache-dir", str(tmp_path / "c")) == 3
    err = capsys.readouterr().err
    assert entry["key"] in err and "does not match" in err


def test_clear_empties_the_cache(tmp_path):
    with ResponseCache(tmp_path / "c") as cache:
        cache.put(_entry("x"))
    assert ucsj("cache", "clear", "--yes", "--cache-dir", str(tmp_path / "c")) == 0
    with ResponseCache(tmp_path / "c") as cache:
        assert len(cache) == 0


def test_two_processes_share_one_cache(tmp_path):
    """Both writers finish with no 'database is locked' and every entry present."""
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT / "tests")!r})
        from test_cache import _entry
        from ucsj.llm import ResponseCache
        with ResponseCache({str(tmp_path / "shared")!r}) as cache:
            for i in range(300):
                cache.put(_entry(sys.argv[1] + str(i)))
    """)
    procs = [
        subprocess.Popen([sys.executable, "-c", script, name], stderr=subprocess.PIPE)
        for name in ("p", "q")
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    with ResponseCache(tmp_path / "shared") as cache:
        assert len(cache) == 600
        assert cache.verify() == []


def test_recorded_run_replays_with_no_server(tmp_path):
    labels = write_dataset(tmp_path / "en.jsonl", "en", 6)
    common = ["--cache-dir", str(tmp_path / "cache"), "--model", "judge-2025-01-01"]
    with FakeLLMServer(ScriptedJudge(labels)) as server:
        live = ["--base-url", server.base_url]
        assert (
            ucsj(
                "gen", "--task", "rag-faithfulness", "-o", str(tmp_path / "c.json"), *live, *common
            )
            == 0
        )
        assert (
            ucsj(
                "score",
                str(tmp_path / "en.jsonl"),
                "--criteria",
                str(tmp_path / "c.json"),
                "-o",
                str(tmp_path / "s1.jsonl"),
                *live,
                *common,
            )
            == 0
        )
    # fixtures: export, then replay from a fresh cache seeded from them, with no server at all
    assert ucsj("cache", "export", "-o", str(tmp_path / "fx.jsonl"), *common[:2]) == 0
    fresh = ["--cache-dir", str(tmp_path / "fresh"), "--model", "judge-2025-01-01"]
    assert ucsj("cache", "import", str(tmp_path / "fx.jsonl"), *fresh[:2]) == 0
    replay = ["--cache", "replay", "--base-url", "http://127.0.0.1:9/v1", *fresh]
    assert ucsj("gen", "--task", "rag-faithfulness", "-o", str(tmp_path / "c2.json"), *replay) == 0
    assert (
        ucsj(
            "score",
            str(tmp_path / "en.jsonl"),
            "--criteria",
            str(tmp_path / "c2.json"),
            "-o",
            str(tmp_path / "s2.jsonl"),
            *replay,
        )
        == 0
    )
    assert (tmp_path / "c.json").read_bytes() == (tmp_path / "c2.json").read_bytes()
    assert (tmp_path / "s1.jsonl").read_bytes() == (tmp_path / "s2.jsonl").read_bytes()


def test_replay_miss_exits_3_naming_the_request(tmp_path, capsys):
    write_dataset(tmp_path / "en.jsonl", "en", 2)
    (tmp_path / "cache").mkdir()  # an empty cache: a miss (a missing one is refused: test_hostile)
    (tmp_path / "c.json").write_text(
        json.dumps(
            {
                "task": "rag-faithfulness",
                "concepts": [
                    {
                        "id": "c1",
                        "name": "A",
                        "questions": [{"id": "c1.q1", "text": "Is it right?"}],
                    }
                ],
            }
        )
    )
    assert (
        ucsj(
            "score",
            str(tmp_path / "en.jsonl"),
            "--criteria",
            str(tmp_path / "c.json"),
            "-o",
            str(tmp_path / "s.jsonl"),
            "--cache",
            "replay",
            "--cache-dir",
            str(tmp_path / "cache"),
        )
        == 3
    )
    err = capsys.readouterr().err
    assert "replay mode: no cached response" in err and "smollm2-135m-instruct" in err
    first_id = json.loads((tmp_path / "en.jsonl").read_text().splitlines()[0])["id"]
    data = tmp_path / "en.jsonl"
    assert f"{data}: sample '{first_id}' (line 1), concept c1 (A)" in err  # as judge names it
    assert not (tmp_path / "s.jsonl").exists()


def test_a_judge_replay_miss_names_the_file_sample_line_and_method_step(tmp_path, capsys):
    write_dataset(tmp_path / "fr.jsonl", "fr", 2)
    write_dataset(tmp_path / "cal.jsonl", "fr", 4)
    (tmp_path / "cache").mkdir()  # empty: every request misses
    offline = ["--task", "rag-faithfulness", "--cache", "replay"]
    offline += ["--cache-dir", str(tmp_path / "cache"), "-o", str(tmp_path / "p.jsonl")]
    first_id = json.loads((tmp_path / "fr.jsonl").read_text().splitlines()[0])["id"]
    assert ucsj("judge", str(tmp_path / "fr.jsonl"), "--method", "cot", *offline) == 3
    err = capsys.readouterr().err
    assert "replay mode: no cached response" in err
    assert f"{tmp_path / 'fr.jsonl'}: sample '{first_id}' (line 1), method cot, step 'cot." in err
    # a miss while judging the --calibrate-on file names that file
    cal_id = json.loads((tmp_path / "cal.jsonl").read_text().splitlines()[0])["id"]
    calibrate = ["--calibrate-on", str(tmp_path / "cal.jsonl")]
    assert (
        ucsj("judge", str(tmp_path / "fr.jsonl"), "--method", "rocketeval", *calibrate, *offline)
        == 3
    )
    err = capsys.readouterr().err
    assert f"{tmp_path / 'cal.jsonl'}: sample '{cal_id}' (line 1), method rocketeval, step '" in err
    assert not (tmp_path / "p.jsonl").exists()


def test_api_key_never_lands_in_cache_outputs_or_logs(tmp_path):
    secret = "sk-live-UNIQUE-5e1f0a9b8c7d"
    labels = write_dataset(tmp_path / "en.jsonl", "en", 4)
    with FakeLLMServer(ScriptedJudge(labels)) as server:
        env = {
            **os.environ,
            "OPENAI_API_KEY": secret,
            "OPENAI_BASE_URL": server.base_url,
            "UCSJ_CACHE_DIR": str(tmp_path / "cache"),
        }
        logs = []
        for args in (
            ["gen", "--task", "rag-faithfulness", "-o", "c.json"],
            ["-v", "score", "en.jsonl", "--criteria", "c.json", "-o", "s.jsonl"],
            ["cache", "export", "-o", "fx.jsonl"],
        ):
            proc = subprocess.run(
                [sys.executable, "-m", "ucsj", *args],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                timeout=120,
            )
            assert proc.returncode == 0, proc.stderr.decode()
            logs.append(proc.stdout + proc.stderr)
        assert server.state.headers[0]["Authorization"] == f"Bearer {secret}"
    for log in logs:
        assert secret.encode() not in log
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_holds_all_and_present_agree_on_a_missing_key(tmp_path, monkeypatch):
    """The rerun's one-count check says no as soon as one key is missing and yes when all are
    stored, whatever the batching and however often a key is given."""
    monkeypatch.setattr("ucsj.llm.cache._KEYS_PER_QUERY", 2)  # several queries per call
    with ResponseCache(tmp_path / "c") as cache:
        stored = []
        for i in range(5):
            entry = _entry(f"text {i}")
            cache.put(entry)
            stored.append(entry["key"])
        missing = "0" * 64
        assert cache.holds_all(stored) and cache.present(stored) == set(stored)
        assert not cache.holds_all([*stored, missing])
        assert not cache.holds_all([stored[0], missing, stored[0]])
        assert cache.holds_all([stored[1], stored[1], *stored])
        assert cache.present([*stored, missing]) == set(stored)
        assert cache.holds_all([])


def test_a_corrupt_recording_is_replaced_by_a_batch_import_as_by_add(tmp_path):
    """add_many (cache import-batch) treats a corrupt row as missing, as add does: kept,
    it would be collected again and skipped again by every import, for ever."""
    good, other = _entry("a"), _entry("b")
    with ResponseCache(tmp_path / "c") as cache:
        cache._store.set(good["key"], "not a cache entry")
        assert cache.get(good["key"]) is None
        assert cache.add_many([good, other]) == 2
        assert cache.get(good["key"])["response"] == good["response"]
        assert cache.add_many([good]) == 0  # recorded now: the first recording wins
