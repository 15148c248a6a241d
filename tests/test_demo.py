"""`ucsj demo`: the whole pipeline from the recorded responses of the built-in model, offline."""

from __future__ import annotations

import json
import subprocess
import sys


def test_demo_replays_offline_and_prints_the_report(tmp_path):
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "OPENAI_BASE_URL": "http://10.255.255.1/v1",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "ucsj", "demo", "--workdir", str(tmp_path / "w")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Replaying recorded responses of SmolLM2-135M-Instruct" in proc.stderr
    assert "ucsj demo --live" in proc.stderr
    for lang in ("fr", "de", "es", "hi", "all"):
        assert f"│ {lang} " in proc.stdout, proc.stdout
    preds = [json.loads(x) for x in (tmp_path / "w" / "hi.preds.jsonl").read_text().splitlines()]
    assert len(preds) == 24 and {p["lang"] for p in preds} == {"hi"}
    assert all(p["pred"] in (0, 1) for p in preds)
    criteria = json.loads((tmp_path / "w" / "criteria.json").read_text())
    assert criteria["generated_by"]["model"] == "smollm2-135m-instruct-q4_1"
    assert not (tmp_path / "cache").exists(), "the demo leaves the default ./cache alone"
