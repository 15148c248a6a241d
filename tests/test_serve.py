"""`ucsj serve` names how the llama.cpp server died and the fix to try (a fake server that dies)."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading

import httpx
import pytest
from conftest import ucsj

from ucsj import serve
from ucsj.errors import BackendError
from ucsj.serve import LocalServer, crash_message, free_port

# Answers /v1/models like llama.cpp's server, then dies as told on the first chat request
# ("segv-on-request"), at once ("segv-at-start"), or exits with code 3 at once ("exit-3").
FAKE_SERVER = """
import os, signal, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

port, mode = int(sys.argv[1]), sys.argv[2]
if mode == "segv-at-start":
    os.kill(os.getpid(), signal.SIGSEGV)
if mode == "exit-3":
    sys.exit(3)

class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = b'{"object": "list", "data": [{"id": "m"}]}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        os.kill(os.getpid(), signal.SIGSEGV)

    def log_message(self, *args):
        pass

HTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""


@pytest.fixture
def fake_server(tmp_path, monkeypatch):
    """Make LocalServer start the fake server in MODE; returns (gguf path, set_mode)."""
    script = tmp_path / "fake_llama_server.py"
    script.write_text(FAKE_SERVER)
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    mode = {"value": "segv-on-request"}

    def command(gguf: object, port: int, alias: str, n_ctx: int) -> list[str]:
        return [sys.executable, str(script), str(port), mode["value"]]

    monkeypatch.setattr(serve, "server_command", command)
    return gguf, lambda value: mode.update(value=value)


def test_a_crash_while_serving_names_the_signal_and_the_portable_rebuild(
    fake_server, capsys, monkeypatch
):
    gguf, _ = fake_server
    port = free_port()
    ready = threading.Event()
    wait_until_ready = serve.wait_until_ready

    def wait_then_signal(*args: object, **kwargs: object) -> None:
        wait_until_ready(*args, **kwargs)
        ready.set()

    monkeypatch.setattr(serve, "wait_until_ready", wait_then_signal)

    def first_request() -> None:
        assert ready.wait(30)
        with contextlib.suppress(httpx.HTTPError):  # it dies mid-request, as the real one did
            httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json={}, timeout=5)

    client = threading.Thread(target=first_request)
    client.start()
    code = ucsj("serve", "--gguf", str(gguf), "--port", str(port))
    client.join()
    captured = capsys.readouterr()
    assert code == 3
    assert f"serving model.gguf as 'smollm2-135m-instruct-q4_1' at http://127.0.0.1:{port}/v1" in (
        captured.out
    )
    assert "the llama.cpp server was killed by SIGSEGV" in captured.err
    assert "while serving" in captured.err
    assert 'CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF" pip install' in captured.err
    assert "--no-cache-dir" in captured.err


def test_a_crash_before_ready_names_the_signal(fake_server):
    gguf, set_mode = fake_server
    set_mode("segv-at-start")
    with pytest.raises(BackendError) as error:
        LocalServer(gguf, free_port(), ready_timeout=30).start()
    message = str(error.value)
    assert "killed by SIGSEGV" in message and "before it was ready" in message
    assert "-DGGML_NATIVE=OFF" in message


def test_an_exit_code_is_reported_with_the_way_to_see_the_log(fake_server, capsys):
    gguf, set_mode = fake_server
    set_mode("exit-3")
    assert ucsj("serve", "--gguf", str(gguf)) == 3
    err = capsys.readouterr().err
    assert "the llama.cpp server exited with code 3 before it was ready" in err
    assert "ucsj serve --log" in err and "GGML_NATIVE" not in err


@pytest.mark.parametrize(
    ("returncode", "expected"),
    [
        (-signal.SIGILL, "was killed by SIGILL"),
        (-signal.SIGBUS, "was killed by SIGBUS"),
        (-signal.SIGKILL, "was killed by SIGKILL"),
        (1, "exited with code 1"),
    ],
)
def test_crash_message(returncode, expected):
    message = crash_message(returncode, "while serving")
    assert expected in message
    assert ("GGML_NATIVE=OFF" in message) == (returncode in (-signal.SIGILL, -signal.SIGBUS))
