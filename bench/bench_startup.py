"""Start-up time of the command line against Python importing its two base libraries.

    python bench/bench_startup.py [ROUNDS]

Each round runs every command once, in turn, so that load on the machine falls on all of
them alike; the report gives the median and the minimum wall time per command and their
ratio to `python -c "import httpx, click"` (the target: within 2x).
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time

BASELINE = "python -c 'import httpx, click'"


def commands() -> dict[str, list[str]]:
    ucsj = shutil.which("ucsj") or sys.exit("ucsj is not on PATH: pip install -e . first")
    return {
        BASELINE: [sys.executable, "-c", "import httpx, click"],
        "ucsj --help": [ucsj, "--help"],
        "ucsj score --help": [ucsj, "score", "--help"],
        "ucsj --version": [ucsj, "--version"],
    }


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main(rounds: int) -> None:
    runs = commands()
    for argv in runs.values():  # warm the file cache
        timed(argv)
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, argv in runs.items():
            times[name].append(timed(argv))
    base_median = statistics.median(times[BASELINE])
    base_min = min(times[BASELINE])
    print(f"{rounds} rounds, Python {sys.version.split()[0]}")
    print("| command | median ms | min ms | median / baseline | min / baseline |")
    print("|---|---|---|---|---|")
    for name, values in times.items():
        median, low = statistics.median(values), min(values)
        print(
            f"| `{name}` | {1000 * median:.0f} | {1000 * low:.0f} | "
            f"{median / base_median:.2f} | {low / base_min:.2f} |"
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
