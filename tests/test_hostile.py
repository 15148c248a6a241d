"""Hostile inputs (issue 13): every case states its exit code, its message, and that no file was
lost, replaced or half-written.

`CASES` is the table of in-process cases: each names its command line, the exit code and a
message that stderr must hold; the runner checks that the files the case protects are
byte-identical afterwards, that no temporary is left behind, and that no request reached the
server when the case says none may. Cases that need a real process (pipes, FIFOs, signals,
file-size limits) follow the table, each with the same checks.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import diskcache
import pytest
from conftest import ROOT, ucsj
from fakeserver import FakeLLMServer, Fault
from synth import ScriptedJudge, write_dataset

from ucsj.answers import answer_lines
from ucsj.llm import ResponseCache

MODEL = "judge-2025-01-01"
N = 40


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """en data, criteria, a recorded cache, scores, a judge and predictions, made once."""
    root = tmp_path_factory.mktemp("hostile")
    labels = write_dataset(root / "en.jsonl", "en", N)
    with FakeLLMServer(ScriptedJudge(labels)) as server:
        common = ["--base-url", server.base_url, "--cache-dir", str(root / "cache")]
        common += ["--model", MODEL]
        assert ucsj("gen", "--task", "rag-faithfulness", "-o", str(root / "c.json"), *common) == 0
        assert (
            ucsj(
                "score",
                str(root / "en.jsonl"),
                "--criteria",
                str(root / "c.json"),
                "-o",
                str(root / "en.scores.jsonl"),
                *common,
            )
            == 0
        )
    args = ["--criteria", str(root / "c.json"), "--module", "logreg"]
    assert (
        ucsj("fit", "--train", str(root / "en.scores.jsonl"), *args, "-o", str(root / "j.skops"))
        == 0
    )
    judge = ["--judge", str(root / "j.skops")]
    assert ucsj("predict", str(root / "en.scores.jsonl"), *judge, "-o", str(root / "p.jsonl")) == 0
    return root


@pytest.fixture
def ws(recorded, tmp_path):
    """A private copy of the recorded workspace, and a server that counts requests."""
    for item in recorded.iterdir():
        target = tmp_path / item.name
        if item.is_dir():
            shutil.copytree(item, target)
        else:
            shutil.copy2(item, target)
    labels = {
        json.loads(x)["answer"]: json.loads(x)["label"] for x in _lines(tmp_path / "en.jsonl")
    }
    with FakeLLMServer(ScriptedJudge(labels)) as server:
        yield Workspace(tmp_path, server)


@dataclass
class Workspace:
    root: Path
    server: FakeLLMServer

    def __truediv__(self, name: str) -> Path:
        return self.root / name

    def llm(self, *extra: str) -> list[str]:
        return [
            "--base-url",
            self.server.base_url,
            "--cache-dir",
            str(self.root / "cache"),
            "--model",
            MODEL,
            *extra,
        ]

    def score(self, data: str, output: str, *extra: str) -> list[str]:
        return ["score", data, "--criteria", str(self / "c.json"), "-o", output, *self.llm(*extra)]


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


# -- the table ---------------------------------------------------------------------------------


@dataclass
class Case:
    name: str
    args: Callable[[Workspace], list[str]]  # the command line
    code: int
    message: str  # stderr holds it (case-insensitive)
    setup: Callable[[Workspace], None] = lambda ws: None
    keep: tuple[str, ...] = ("en.jsonl", "c.json", "en.scores.jsonl", "j.skops", "p.jsonl")
    absent: tuple[str, ...] = ()  # files that must not exist afterwards
    no_request: bool = True
    stdout: str = ""  # standard output holds it
    stdin: str | None = None  # the workspace file fed to standard input (else "n\n")
    check: Callable[[Workspace], None] = lambda ws: None


def _write(name: str, data: bytes | str) -> Callable[[Workspace], None]:
    def setup(ws: Workspace) -> None:
        (ws / name).write_bytes(data.encode() if isinstance(data, str) else data)

    return setup


GOOD = {
    "id": "x1",
    "lang": "en",
    "context": ["Passage."],
    "query": "When?",
    "answer": "It opened in 1900.",
    "label": 1,
}


def _data(text: str) -> Callable[[Workspace], None]:
    return _write("bad.jsonl", json.dumps(GOOD) + "\n" + text + "\n")


def _criteria_with_fingerprint(fingerprint: str | None) -> Callable[[Workspace], None]:
    def setup(ws: Workspace) -> None:
        data = json.loads((ws / "c.json").read_text())
        if fingerprint is None:
            data.pop("fingerprint")
        else:
            data["fingerprint"] = fingerprint
        data["concepts"][0]["questions"][0]["text"] = "Does the answer satisfy attribution check 9?"
        (ws / "c2.json").write_text(json.dumps(data))

    return setup


def _judge_padded(ws: Workspace) -> None:
    with (
        zipfile.ZipFile(ws / "j.skops") as src,
        zipfile.ZipFile(ws / "padded.skops", "w", zipfile.ZIP_DEFLATED) as out,
    ):
        for name in src.namelist():
            content = src.read(name)
            if name == "schema.json":  # valid JSON followed by 40 MB of whitespace
                content += b" " * (40 << 20)
            out.writestr(name, content)


def _plant_pickle(ws: Workspace) -> None:
    """Overwrite one recorded response with a pickle that creates a file when loaded, and add a
    row whose key is such a pickle."""
    _drop_memo(ws)
    with ResponseCache(ws / "cache") as store:
        key = store.keys()[0]
    marker = str(ws / "PWNED")
    with diskcache.Cache(str(ws / "cache")) as raw:  # diskcache's default Disk: it pickles
        raw.set(key, Exploit(marker))
        raw.set(Exploit(marker + "-key"), "x")


class Exploit:
    """Unpickling this opens (creates) the marker file: proof that code ran."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _drop_memo(ws: Workspace) -> None:
    """Without the record memo, every line is computed from the cache rows under test."""
    for item in (ws / "cache").glob("records.sqlite3*"):
        item.unlink()


def _no_marker(ws: Workspace) -> None:
    assert not list(ws.root.glob("PWNED*")), "a pickle in the cache was loaded"


def _edit_cached_response(ws: Workspace) -> None:
    """Edit one stored response in place, keeping its digest, as a tampered cache would."""
    _drop_memo(ws)
    with ResponseCache(ws / "cache") as store:
        key = store.keys()[0]
        entry = store.get(key)
        entry["response"]["choices"][0]["message"]["content"] = "Q1: No"
        store._store.set(key, json.dumps(entry))


def _export_and_edit(ws: Workspace) -> None:
    assert (
        ucsj("cache", "export", "-o", str(ws / "fx.jsonl"), "--cache-dir", str(ws / "cache")) == 0
    )
    lines = _lines(ws / "fx.jsonl")
    entry = json.loads(lines[2])
    entry["response"]["choices"][0]["message"]["content"] += " (edited)"
    lines[2] = json.dumps(entry)
    (ws / "fx.jsonl").write_text("\n".join(lines) + "\n")


def _export(ws: Workspace) -> None:
    assert (
        ucsj("cache", "export", "-o", str(ws / "fx.jsonl"), "--cache-dir", str(ws / "cache")) == 0
    )


def _same_entries(a: Path, b: Path) -> None:
    with ResponseCache(a) as one, ResponseCache(b) as two:
        assert one.keys() == two.keys() and len(one) > 0


def _corrupt_db(ws: Workspace) -> None:
    (ws / "cache" / "cache.db").write_bytes(b"this is not a database" * 100)


def _truncate_db(ws: Workspace) -> None:
    db = ws / "cache" / "cache.db"
    for suffix in ("-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    db.write_bytes(db.read_bytes()[: 4096 * 2])


def _empty_cache_keep_memo(ws: Workspace) -> None:
    """The memo outlives its cache: cache.db gone, records.sqlite3 kept."""
    for item in (ws / "cache").iterdir():
        if not item.name.startswith("records.sqlite3"):
            shutil.rmtree(item) if item.is_dir() else item.unlink()


def _hardlink(ws: Workspace) -> None:
    os.link(ws / "en.jsonl", ws / "same.jsonl")


def _symlink(ws: Workspace) -> None:
    (ws / "link.jsonl").symlink_to(ws / "en.jsonl")


def _stale_temporaries(ws: Workspace) -> None:
    (ws / ".out.jsonl.abc123.tmp").write_text("half")
    (ws / ".out.jsonl.999999999.xyz.tmp").write_text("half")
    (ws / ".other.jsonl.abc.tmp").write_text("not ours")


def _stale_removed(ws: Workspace) -> None:
    assert not (ws / ".out.jsonl.abc123.tmp").exists()
    assert not (ws / ".out.jsonl.999999999.xyz.tmp").exists()
    assert (ws / ".other.jsonl.abc.tmp").exists(), "another output's temporary is not touched"
    assert len(_lines(ws / "out.jsonl")) == N


def _same_as_scores(name: str) -> Callable[[Workspace], None]:
    def check(ws: Workspace) -> None:
        assert (ws / name).read_bytes() == (ws / "en.scores.jsonl").read_bytes()

    return check


def _symlink_output(ws: Workspace) -> None:
    (ws / "target.jsonl").write_text("old\n")
    (ws / "out-link.jsonl").symlink_to("target.jsonl")


def _written_through_link(ws: Workspace) -> None:
    assert (ws / "out-link.jsonl").is_symlink(), "the link is kept"
    assert (ws / "target.jsonl").read_bytes() == (ws / "en.scores.jsonl").read_bytes()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _memo_hits_replaced(ws: Workspace) -> None:
    """Tamper with every memo line: the lines are recomputed from the cache, not served."""
    db = sqlite3.connect(ws / "cache" / "records.sqlite3")
    db.execute("UPDATE memo SET value = replace(value, '\"en\"', '\"fr\"')")
    db.commit()
    db.close()


CASES = [
    # 1. one-shot inputs are read where they are named, "-" included
    Case(
        "score - (standard input) is not 'file not found'",
        lambda ws: ws.score("-", str(ws / "out.jsonl"), "--cache", "replay"),
        0,
        "",
        check=_same_as_scores("out.jsonl"),
        stdin="en.jsonl",
    ),
    Case(
        "cache import - reads standard input",
        lambda ws: ["cache", "import", "-", "--cache-dir", str(ws / "cache2")],
        0,
        "imported",
        setup=lambda ws: _export(ws),
        stdin="fx.jsonl",
        check=lambda ws: _same_entries(ws / "cache", ws / "cache2"),
    ),
    # 2. outputs that are not plain files
    Case(
        "-o onto a symlink writes its target and keeps the link",
        lambda ws: ws.score(str(ws / "en.jsonl"), str(ws / "out-link.jsonl"), "--cache", "replay"),
        0,
        "",
        setup=_symlink_output,
        check=_written_through_link,
    ),
    # 3. an output that is an input
    Case(
        "score x -o x",
        lambda ws: ws.score(str(ws / "en.jsonl"), str(ws / "en.jsonl")),
        2,
        "is also an input",
    ),
    Case(
        "score x -o a hard link of x",
        lambda ws: ws.score(str(ws / "en.jsonl"), str(ws / "same.jsonl")),
        2,
        "is also an input",
        setup=_hardlink,
    ),
    Case(
        "score x -o a symlink to x",
        lambda ws: ws.score(str(ws / "en.jsonl"), str(ws / "link.jsonl")),
        2,
        "is also an input",
        setup=_symlink,
    ),
    Case(
        "score --criteria c -o c",
        lambda ws: ws.score(str(ws / "en.jsonl"), str(ws / "c.json")),
        2,
        "is also an input",
    ),
    Case(
        "predict x -o x",
        lambda ws: [
            "predict",
            str(ws / "en.scores.jsonl"),
            "--judge",
            str(ws / "j.skops"),
            "-o",
            str(ws / "en.scores.jsonl"),
        ],
        2,
        "is also an input",
    ),
    Case(
        "predict x --judge j -o j",
        lambda ws: [
            "predict",
            str(ws / "en.scores.jsonl"),
            "--judge",
            str(ws / "j.skops"),
            "-o",
            str(ws / "j.skops"),
        ],
        2,
        "is also an input",
    ),
    Case(
        "fit --train x -o x",
        lambda ws: [
            "fit",
            "--train",
            str(ws / "en.scores.jsonl"),
            "--criteria",
            str(ws / "c.json"),
            "-o",
            str(ws / "en.scores.jsonl"),
        ],
        2,
        "is also an input",
    ),
    Case(
        "report p --json p",
        lambda ws: ["report", str(ws / "p.jsonl"), "--json", str(ws / "p.jsonl")],
        2,
        "is also an input",
    ),
    Case(
        "analyze shift --json onto its scores",
        lambda ws: [
            "analyze",
            "shift",
            str(ws / "en.scores.jsonl"),
            "--judge",
            str(ws / "j.skops"),
            "--json",
            str(ws / "en.scores.jsonl"),
        ],
        2,
        "is also an input",
    ),
    Case(
        "convert memerag x -o x",
        lambda ws: ["convert", "memerag", str(ws / "en.jsonl"), "-o", str(ws / "en.jsonl")],
        2,
        "is also an input",
    ),
    # 4. "-" is standard output for every output
    Case(
        "report --json - and --junit - write no file named '-'",
        lambda ws: ["report", str(ws / "p.jsonl"), "--json", "-", "--junit", "-"],
        0,
        "",
        absent=("-",),
        stdout="<testsuites>",
    ),
    Case(
        "gen -o - writes no file named '-'",
        lambda ws: ["gen", "--task", "rag-faithfulness", "-o", "-", *ws.llm("--cache", "replay")],
        0,
        "",
        absent=("-",),
        stdout='"format": "ucsj.criteria/1"',
    ),
    # 6. stale temporaries of the same output are removed
    Case(
        "a killed run's temporaries are removed by the next run",
        lambda ws: ws.score(str(ws / "en.jsonl"), str(ws / "out.jsonl"), "--cache", "replay"),
        0,
        "",
        setup=_stale_temporaries,
        check=_stale_removed,
    ),
    # 7. the cache never unpickles
    Case(
        "a pickled row is a miss on --cache replay, and never loaded",
        lambda ws: ws.score(str(ws / "en.jsonl"), str(ws / "out.jsonl"), "--cache", "replay"),
        3,
        "replay mode: no cached response",
        setup=_plant_pickle,
        absent=("out.jsonl",),
        check=_no_marker,
    ),
    Case(
        "a pickled row is re-asked and replaced on score",
        lambda ws: ws.score(str(ws / "en.jsonl"), str(ws / "out.jsonl")),
        0,
        "",
        setup=_plant_pickle,
        no_request=False,
        check=lambda ws: (_no_marker(ws), _same_as_scores("out.jsonl")(ws)),
    ),
    Case(
        "cache verify reports pickled rows without loading them",
        lambda ws: ["cache", "verify", "--cache-dir", str(ws / "cache")],
        3,
        "pickled",
        setup=_plant_pickle,
        check=_no_marker,
    ),
    # 8. responses carry a digest
    Case(
        "cache import refuses an edited response, naming the line",
        lambda ws: ["cache", "import", str(ws / "fx.jsonl"), "--cache-dir", str(ws / "cache2")],
        2,
        "fx.jsonl:3: the response was edited",
        setup=_export_and_edit,
    ),
    Case(
        "cache verify names an edited response",
        lambda ws: ["cache", "verify", "--cache-dir", str(ws / "cache")],
        3,
        "the response was edited",
        setup=_edit_cached_response,
    ),
    Case(
        "replay does not use an edited response",
        lambda ws: ws.score(str(ws / "en.jsonl"), str(ws / "out.jsonl"), "--cache", "replay"),
        3,
        "replay mode: no cached response",
        setup=_edit_cached_response,
        absent=("out.jsonl",),
    ),
    # 9. the record memo is checked
    Case(
        "a memo that outlived its cache does not answer a replay",
        lambda ws: ws.score(str(ws / "en.jsonl"), str(ws / "out.jsonl"), "--cache", "replay"),
        3,
        "replay mode: no cached response",
        setup=_empty_cache_keep_memo,
        absent=("out.jsonl",),
    ),
    Case(
        "a tampered memo line is recomputed",
        lambda ws: ws.score(str(ws / "en.jsonl"), str(ws / "out.jsonl"), "--cache", "replay"),
        0,
        "",
        setup=_memo_hits_replaced,
        check=_same_as_scores("out.jsonl"),
    ),
    # 10. the criteria fingerprint
    Case(
        "criteria edited after their fingerprint was made",
        lambda ws: (
            [
                *ws.score(str(ws / "en.jsonl"), str(ws / "out.jsonl")),
                "--criteria",
                str(ws / "c2.json"),
            ]
        ),
        2,
        "does not match its content",
        setup=_criteria_with_fingerprint("sha256:" + "0" * 64),
        absent=("out.jsonl",),
    ),
    # 11-12. secrets
    Case(
        "credentials in --base-url are never shown",
        lambda ws: [
            "score",
            str(ws / "en.jsonl"),
            "--criteria",
            str(ws / "c.json"),
            "-o",
            str(ws / "out.jsonl"),
            "--cache",
            "off",
            "--base-url",
            f"http://user:SECRETKEY123@127.0.0.1:{_free_port()}/v1",
            "--max-retries",
            "0",
        ],
        3,
        "cannot connect to http://***@127.0.0.1",
        absent=("out.jsonl",),
    ),
    # 13. the cache's storage
    Case(
        "a corrupt cache.db says what to do",
        lambda ws: ws.score(str(ws / "en.jsonl"), str(ws / "out.jsonl")),
        3,
        "move the cache directory aside",
        setup=_corrupt_db,
        absent=("out.jsonl",),
    ),
    Case(
        "a truncated cache.db says what to do",
        lambda ws: ws.score(str(ws / "en.jsonl"), str(ws / "out.jsonl")),
        3,
        "move the cache directory aside",
        setup=_truncate_db,
        absent=("out.jsonl",),
    ),
    # 14. data that parses but cannot be processed
    Case(
        "a lone surrogate in an id",
        lambda ws: ws.score(str(ws / "bad.jsonl"), str(ws / "out.jsonl")),
        2,
        "bad.jsonl:2: a string holds a lone UTF-16 surrogate",
        setup=_data(json.dumps({**GOOD, "id": "\ud800x"})),
        absent=("out.jsonl",),
    ),
    Case(
        "a 5,000-digit number",
        lambda ws: ws.score(str(ws / "bad.jsonl"), str(ws / "out.jsonl")),
        2,
        "bad.jsonl:2: invalid JSON",
        setup=_data(json.dumps({**GOOD, "id": "y"})[:-1] + ', "n": ' + "9" * 5000 + "}"),
        absent=("out.jsonl",),
    ),
    Case(
        "100,000 nested brackets",
        lambda ws: ws.score(str(ws / "bad.jsonl"), str(ws / "out.jsonl")),
        2,
        "bad.jsonl:2: invalid JSON: nested too deeply",
        setup=_data("[" * 100_000 + "]" * 100_000),
        absent=("out.jsonl",),
    ),
    # 15. base URLs no request can reach
    Case(
        "--base-url with port 99999",
        lambda ws: (
            [
                *ws.score(str(ws / "en.jsonl"), str(ws / "out.jsonl")),
                "--base-url",
                "http://127.0.0.1:99999/v1",
            ]
        ),
        2,
        "is not a valid URL",
        absent=("out.jsonl",),
    ),
    Case(
        "--base-url notaurl",
        lambda ws: (
            [*ws.score(str(ws / "en.jsonl"), str(ws / "out.jsonl")), "--base-url", "notaurl"]
        ),
        2,
        "is not an http(s) URL",
        absent=("out.jsonl",),
    ),
    # 18. clear errors
    Case(
        "report with a non-numeric 'unreadable'",
        lambda ws: ["report", str(ws / "bad.jsonl")],
        2,
        "bad.jsonl:1 field 'unreadable': must be a share",
        setup=_write(
            "bad.jsonl",
            json.dumps(
                {"id": "a", "lang": "en", "method": "m", "label": 1, "pred": 1, "unreadable": "a"}
            ),
        ),
    ),
    Case(
        "convert mface on a CSV that is not UTF-8",
        lambda ws: ["convert", "mface", str(ws / "m.csv"), "-o", str(ws / "m.jsonl")],
        2,
        "m.csv:3: bytes are not UTF-8",
        setup=_write(
            "m.csv", b"id,lang,input,summary,q2_avg\n1,en,a,b,0.5\n2,fr,\xe9t\xe9,b,0.5\n"
        ),
        absent=("m.jsonl",),
    ),
    Case(
        "convert liteval on a CSV that is not UTF-8",
        lambda ws: ["convert", "liteval", str(ws / "l.csv"), "-o", str(ws / "l.jsonl")],
        2,
        "bytes are not UTF-8",
        setup=_write("l.csv", b"id,src\xff\n1,a\n"),
        absent=("l.jsonl",),
    ),
    Case(
        "a /proc file that fails to read",
        lambda ws: ws.score("/proc/self/mem", str(ws / "out.jsonl")),
        2,
        "/proc/self/mem:1: cannot read",
        absent=("out.jsonl",),
    ),
    Case(
        "answering n to cache clear",
        lambda ws: ["cache", "clear", "--cache-dir", str(ws / "cache")],
        0,
        "nothing deleted",
        check=lambda ws: _entries_kept(ws),
    ),
    Case(
        "a read-only output names the output, not its temporary",
        lambda ws: ws.score(str(ws / "en.jsonl"), "/sys/ucsj-out.jsonl", "--cache", "replay"),
        2,
        "/sys/ucsj-out.jsonl: cannot write",
    ),
    Case(
        "a cache directory that cannot be written",
        lambda ws: [*ws.score(str(ws / "en.jsonl"), str(ws / "out.jsonl")), "--cache-dir", "/sys"],
        3,
        "cannot open the response cache /sys",
        absent=("out.jsonl",),
    ),
    # 19. bounded reads
    Case(
        "a judge archive padded with whitespace",
        lambda ws: [
            "predict",
            str(ws / "en.scores.jsonl"),
            "--judge",
            str(ws / "padded.skops"),
            "-o",
            str(ws / "out.jsonl"),
        ],
        2,
        "judge archive is too large",
        setup=_judge_padded,
        absent=("out.jsonl",),
    ),
    # 20. replay misses
    Case(
        "--cache replay with no cache directory",
        lambda ws: (
            [
                *ws.score(str(ws / "en.jsonl"), str(ws / "out.jsonl")),
                "--cache",
                "replay",
                "--cache-dir",
                str(ws / "nocache"),
            ]
        ),
        2,
        "no cache directory at",
        absent=("out.jsonl", "nocache"),
    ),
]


CASES += [
    # probe: cache export onto the cache's own files
    *(
        Case(
            f"cache export onto the cache's {name}",
            lambda ws, name=name: [
                "cache",
                "export",
                "--cache-dir",
                str(ws / "cache"),
                "-o",
                str(ws / "cache" / name),
            ],
            2,
            "is inside the cache directory",
            check=lambda ws: _cache_intact(ws),
        )
        for name in ("cache.db", "records.sqlite3", "fixture.jsonl")
    ),
    Case(
        "cache export onto a hard link of the cache database",
        lambda ws: [
            "cache",
            "export",
            "--cache-dir",
            str(ws / "cache"),
            "-o",
            str(ws / "db-link"),
        ],
        2,
        "is also an input",
        setup=lambda ws: os.link(ws / "cache" / "cache.db", ws / "db-link"),
        check=lambda ws: _cache_intact(ws),
    ),
]


CASES += [
    # probe: a damaged record memo beside the cache
    Case(
        "cache stats with a damaged record memo",
        lambda ws: ["cache", "stats", "--cache-dir", str(ws / "cache")],
        3,
        "is damaged; move the cache directory aside",
        setup=lambda ws: _damage_memo(ws),
    ),
    Case(
        "cache import with a damaged record memo",
        lambda ws: ["cache", "import", str(ws / "fx.jsonl"), "--cache-dir", str(ws / "cache")],
        3,
        "is damaged; move the cache directory aside",
        setup=lambda ws: (_export(ws), _damage_memo(ws)),
    ),
    Case(
        "cache clear rebuilds a damaged record memo",
        lambda ws: ["cache", "clear", "--yes", "--cache-dir", str(ws / "cache")],
        0,
        "deleted",
        setup=lambda ws: _damage_memo(ws),
        check=lambda ws: _memo_rebuilt(ws),
    ),
]


CASES += [
    # probe: what a scoring failure says about the cache follows --cache
    Case(
        "scoring failures with --cache off say nothing was cached",
        lambda ws: ws.score(str(ws / "en.jsonl"), str(ws / "out.jsonl"), "--cache", "off"),
        3,
        "with --cache off nothing was cached",
        setup=lambda ws: ws.server.queue(*[Fault("401")] * (N * 5)),
        no_request=False,
    ),
]


CASES += [
    # probe: a missing input file is reported as every other input error is
    Case(
        "cache import of a missing file",
        lambda ws: ["cache", "import", str(ws / "missing.jsonl"), "--cache-dir", str(ws / "cache")],
        2,
        "missing.jsonl: file not found",  # not click's "Usage: ... Error: Path ... does not exist"
        check=lambda ws: _entries_kept(ws),
    ),
    Case(
        "report --figure of a missing file",
        lambda ws: [
            "report",
            str(ws / "p.jsonl"),
            "--html",
            str(ws / "r.html"),
            "--figure",
            str(ws / "missing.png"),
        ],
        2,
        "missing.png: file not found",
        absent=("r.html",),
    ),
]


def _damage_memo(ws: Workspace) -> None:
    _drop_memo(ws)
    (ws / "cache" / "records.sqlite3").write_bytes(b"garbage, not a database" * 200)


def _memo_rebuilt(ws: Workspace) -> None:
    with ResponseCache(ws / "cache") as store:
        assert len(store) == 0 and store.stats().memo_lines == 0
    assert ucsj(*ws.score(str(ws / "en.jsonl"), str(ws / "out.jsonl"))) == 0
    with ResponseCache(ws / "cache") as store:
        assert store.stats().memo_lines == N, "the memo works again"


def _cache_intact(ws: Workspace) -> None:
    for command in ("stats", "verify"):
        assert ucsj("cache", command, "--cache-dir", str(ws / "cache")) == 0, command
    assert not (ws / "cache" / "fixture.jsonl").exists()


def _entries_kept(ws: Workspace) -> None:
    with ResponseCache(ws / "cache") as store:
        assert len(store) > 0


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_case(case, ws, capsys, monkeypatch):
    monkeypatch.chdir(ws.root)  # a file named "-" would land here
    case.setup(ws)
    fed = (ws / case.stdin).read_bytes() if case.stdin else b"n\n"
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(fed)))
    before = {name: (ws / name).read_bytes() for name in case.keep}
    sent = ws.server.count
    code = ucsj(*case.args(ws))
    out, err = capsys.readouterr()
    assert code == case.code, err
    assert case.stdout in out
    assert case.message.lower() in err.lower(), err
    assert "Traceback" not in err and "SECRETKEY123" not in err
    for name, content in before.items():
        assert (ws / name).read_bytes() == content, f"{name} was changed"
    for name in case.absent:
        assert not (ws / name).exists(), f"{name} exists"
    assert not list(ws.root.rglob(".*.jsonl.*.tmp")) or case.name.startswith("a killed")
    if case.no_request:
        assert ws.server.count == sent, "no request may be sent"
    case.check(ws)


def test_a_response_echoing_the_key_in_another_case_is_redacted(ws, capsys, monkeypatch):
    key = "sk-test-abcdefghij0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    body = json.dumps({"error": {"message": f"bad key {key.upper()}; header Bearer xyz12345678"}})
    ws.server.queue(*[Fault("401", body=body)] * (N * 5))
    args = ws.score(str(ws / "en.jsonl"), str(ws / "out.jsonl"), "--cache", "off")
    assert ucsj(*args) == 3
    err = capsys.readouterr().err
    written = (ws / "out.jsonl").read_text()
    assert "answered HTTP 401" in err and '"error"' in written
    for text in (err, written):
        assert key.lower() not in text.lower() and "xyz12345678" not in text


def test_answers_past_question_999_are_read():
    lines = answer_lines("Q999: Yes\nQ1000: No\nQ1500: Yes\n")
    assert {n: a.value for n, a in lines.items()} == {999: 1, 1000: 0, 1500: 1}


def test_a_criteria_file_without_a_fingerprint_gets_one(ws, capsys):
    _criteria_with_fingerprint(None)(ws)
    code = ucsj(
        *ws.score(str(ws / "en.jsonl"), str(ws / "out.jsonl")), "--criteria", str(ws / "c2.json")
    )
    assert code == 0, capsys.readouterr().err
    assert json.loads(_lines(ws / "out.jsonl")[0])["criteria"].startswith("sha256:")


# -- cases that need a process of their own -------------------------------------------------


def _cli(
    ws: Workspace,
    *args: str,
    stdin: bytes | None = None,
    pass_fds: tuple[int, ...] = (),
    preexec: Callable[[], None] | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "UCSJ_CACHE_DIR": str(ws / "cache")}
    env.pop("OPENAI_API_KEY", None)
    return subprocess.run(
        [sys.executable, "-m", "ucsj", *args],
        input=stdin,
        capture_output=True,
        cwd=ws.root,
        env=env,
        pass_fds=pass_fds,
        preexec_fn=preexec,
        timeout=timeout,
        check=False,
    )


def _replay_score(ws: Workspace, data: str, output: str) -> list[str]:
    return [
        "score",
        data,
        "--criteria",
        "c.json",
        "-o",
        output,
        "--model",
        MODEL,
        "--cache",
        "replay",
    ]


def test_piped_input_is_read_once_and_scored(ws):
    (ws / "out.jsonl").write_text("an earlier output\n")
    proc = _cli(
        ws, *_replay_score(ws, "/dev/stdin", "out.jsonl"), stdin=(ws / "en.jsonl").read_bytes()
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert (ws / "out.jsonl").read_bytes() == (ws / "en.scores.jsonl").read_bytes()


def test_process_substitution_input_is_scored(ws):
    read, write = os.pipe()
    feeder = threading.Thread(target=_feed, args=(write, (ws / "en.jsonl").read_bytes()))
    feeder.start()
    try:
        proc = _cli(ws, *_replay_score(ws, f"/dev/fd/{read}", "-"), pass_fds=(read,))
    finally:
        os.close(read)
        feeder.join()
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout == (ws / "en.scores.jsonl").read_bytes()


def _feed(fd: int, data: bytes) -> None:
    with open(fd, "wb") as pipe:
        pipe.write(data)


def test_fifo_input_is_scored(ws):
    fifo = ws / "in.fifo"
    os.mkfifo(fifo)
    feeder = threading.Thread(target=lambda: fifo.write_bytes((ws / "en.jsonl").read_bytes()))
    feeder.start()
    proc = _cli(ws, *_replay_score(ws, str(fifo), "out.jsonl"))
    feeder.join()
    assert proc.returncode == 0, proc.stderr.decode()
    assert (ws / "out.jsonl").read_bytes() == (ws / "en.scores.jsonl").read_bytes()


def test_fit_and_predict_read_pipes(ws):
    scores = (ws / "en.scores.jsonl").read_bytes()
    proc = _cli(ws, "predict", "-", "--judge", "j.skops", stdin=scores)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout == (ws / "p.jsonl").read_bytes()
    fit = ["fit", "--train", "/dev/stdin", "--criteria", "c.json", "--module", "logreg", "-o", "-"]
    proc = _cli(ws, *fit, stdin=scores)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout == (ws / "j.skops").read_bytes(), "fit -o - writes the archive to stdout"
    assert not (ws / "-").exists()


def test_outputs_onto_fifos_and_proc_fd_are_written_directly(ws):
    proc = _cli(ws, *_replay_score(ws, "en.jsonl", "/proc/self/fd/1"))
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout == (ws / "en.scores.jsonl").read_bytes()
    fifo = ws / "out.fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    proc = _cli(ws, *_replay_score(ws, "en.jsonl", str(fifo)))
    reader.join()
    assert proc.returncode == 0, proc.stderr.decode()
    assert fifo.is_fifo(), "the FIFO is not replaced by a file"
    assert received == [(ws / "en.scores.jsonl").read_bytes()]


def _limit_file_size(limit: int) -> Callable[[], None]:
    def apply() -> None:
        import resource

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def test_a_full_disk_on_the_output_names_it_and_keeps_the_old_file(ws):
    (ws / "out.jsonl").write_text("an earlier output\n")
    args = ["score", "en.jsonl", "--criteria", "c.json", "-o", "out.jsonl", "--model", MODEL]
    args += ["--base-url", ws.server.base_url, "--cache", "off"]  # only the output grows
    proc = _cli(ws, *args, preexec=_limit_file_size(20_000))
    err = proc.stderr.decode()
    assert proc.returncode == 3, err
    assert "out.jsonl: cannot write" in err and "Traceback" not in err
    assert (ws / "out.jsonl").read_text() == "an earlier output\n"
    assert not list(ws.root.glob(".out.jsonl.*"))


def test_a_full_disk_under_the_cache_is_a_clear_error(ws):
    args = ["score", "en.jsonl", "--criteria", "c.json", "-o", "out.jsonl", "--model", MODEL]
    args += ["--base-url", ws.server.base_url, "--cache-dir", "fresh-cache"]
    proc = _cli(ws, *args, preexec=_limit_file_size(30_000))
    err = proc.stderr.decode()
    assert proc.returncode == 3, err
    assert "free some space" in err and "Traceback" not in err
    assert not (ws / "out.jsonl").exists()


def test_no_server_and_no_retries_prints_no_task_tracebacks(ws):
    port = _free_port()
    args = ["score", "en.jsonl", "--criteria", "c.json", "-o", "out.jsonl", "--cache", "off"]
    args += ["--base-url", f"http://127.0.0.1:{port}/v1", "--max-retries", "0"]
    proc = _cli(ws, *args)
    err = proc.stderr.decode()
    assert proc.returncode == 3, err
    assert "cannot connect" in err
    assert "Task exception was never retrieved" not in err and "Traceback" not in err


def test_a_refused_loopback_connection_is_retried_once_and_each_wait_is_shown(ws):
    port = _free_port()
    args = ["-v", "score", "en.jsonl", "--criteria", "c.json", "-o", "out.jsonl", "--cache", "off"]
    args += ["--base-url", f"http://127.0.0.1:{port}/v1", "--concurrency", "1"]
    proc = _cli(ws, *args)
    err = proc.stderr.decode()
    assert proc.returncode == 3, err
    assert "retry 1 of 5" in err and "retry 2 of 5" not in err


@pytest.mark.parametrize("delay", [0.3, 0.8])
def test_an_interrupt_at_start_up_exits_130_quietly(ws, delay):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ucsj", "score", "-", "--criteria", "c.json", "-o", "out.jsonl"],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ws.root,
        env=env,
    )
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    text = err.decode()
    assert not (ws / "out.jsonl").exists()
    if proc.returncode == 1 and "/ucsj/" not in text:
        pytest.skip("the interrupt came during Python's own start-up, before ucsj ran")
    assert proc.returncode == 130, text
    assert "Traceback" not in text and "ucsj: interrupted" in text


@pytest.mark.parametrize(
    "text,secret,gone",
    [
        ("cannot connect to http://user:KEY9@host:8080/v1", None, "user:KEY9"),
        ("echoed SK-LIVE-ABCDEF123456", "sk-live-abcdef123456", "ABCDEF123456"),
        ("Authorization: Bearer tok_0123456789", None, "tok_0123456789"),
        ("invalid key sk-proj-0123456789abcdef", None, "0123456789abcdef"),
    ],
)
def test_redaction_masks_credentials(text, secret, gone):
    from ucsj.redact import redact

    masked = redact(text, [secret])
    assert gone.lower() not in masked.lower() and "***" in masked


# -- an output on standard output: stdout holds only its bytes --------------------------------


def _stdout_of(capsysbinary, *args: str) -> bytes:
    code = ucsj(*args)
    out, err = capsysbinary.readouterr()
    assert code == 0, err.decode()
    return out


def _undated(page: bytes) -> bytes:
    return re.sub(rb"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", b"(date)", page)


@pytest.mark.parametrize("quiet", [[], ["-q"]])
@pytest.mark.parametrize(
    "flag,name",
    [("--json", "r.json"), ("--junit", "r.xml"), ("--html", "r.html")],
)
def test_report_output_on_stdout_is_only_that_output(
    ws, capsysbinary, monkeypatch, quiet, flag, name
):
    monkeypatch.chdir(ws.root)
    _stdout_of(capsysbinary, "report", "p.jsonl", flag, name)
    out = _stdout_of(capsysbinary, *quiet, "report", "p.jsonl", flag, "-")
    written = (ws / name).read_bytes()
    if flag == "--html":  # the page names the command and the time that made it
        written = _undated(written.replace(b"--html r.html", b"--html -"))
        out = _undated(out)
        assert out.startswith(b"<!doctype html>") and out.endswith(b"</html>\n")
    assert out == written
    if flag == "--json":
        json.loads(out)


def test_report_table_stays_on_stdout_without_a_stdout_output(ws, capsysbinary, monkeypatch):
    monkeypatch.chdir(ws.root)
    out = _stdout_of(capsysbinary, "report", "p.jsonl", "--json", "r.json")
    assert b"[95% CI]" in out


def test_analyze_shift_outputs_on_stdout_are_only_their_bytes(ws, capsysbinary, monkeypatch):
    monkeypatch.chdir(ws.root)
    shift = ["analyze", "shift", "en.scores.jsonl", "--judge", "j.skops"]
    _stdout_of(capsysbinary, *shift, "--json", "s.json", "--plot", "s.png")
    out = _stdout_of(capsysbinary, *shift, "--json", "-", "--plot", "s2.png")
    assert out == (ws / "s.json").read_bytes()
    out = _stdout_of(capsysbinary, *shift, "--plot", "-")
    assert out == (ws / "s.png").read_bytes() and out.startswith(b"\x89PNG")


def test_fit_archive_on_stdout_is_only_the_archive(ws, capsysbinary, monkeypatch):
    monkeypatch.chdir(ws.root)
    fit = ["fit", "--train", "en.scores.jsonl", "--criteria", "c.json", "--module", "auto"]
    _stdout_of(capsysbinary, *fit, "-o", "auto.skops")
    out = _stdout_of(capsysbinary, *fit, "-o", "-")
    assert out == (ws / "auto.skops").read_bytes()


# -- an input error found part-way leaves no output, on standard output too ---------------------


MM_EVAL_ROW = {
    "id": "1",
    "prompt": "Hi?",
    "chosen": "Hello.",
    "rejected": "Go.",
    "language": "fr",
    "subset": "chat",
}


@pytest.mark.parametrize(
    "kind,name,text,message",
    [
        (
            "liteval",
            "lit.csv",
            "source,tgt,pair,rating\nDas Haus.,The house.,de-en,5\nEin Hund.,A dog.,de-en,x\n",
            "lit.csv:3 field 'rating': not a number",
        ),
        (
            "mm-eval",
            "mm.jsonl",
            json.dumps(MM_EVAL_ROW) + "\n{not json\n",
            "mm.jsonl:2: invalid JSON",
        ),
    ],
)
def test_convert_to_stdout_writes_nothing_before_an_input_error(
    tmp_path, capsys, kind, name, text, message
):
    (tmp_path / name).write_text(text)
    code = ucsj("convert", kind, str(tmp_path / name))
    out, err = capsys.readouterr()
    assert code == 2 and message in err, err
    assert out == "", "no partial output on stdout"


def test_cache_verify_help_names_both_checks(capsys):
    assert ucsj("cache", "verify", "--help") == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "request" in text and "response digest" in text


def test_report_json_on_a_real_pipe_parses(ws):
    proc = _cli(ws, "report", "p.jsonl", "--json", "-")
    assert proc.returncode == 0, proc.stderr.decode()
    assert json.loads(proc.stdout)["kind"] == "binary"
    assert b"[95% CI]" in proc.stderr, "the table goes to stderr"
