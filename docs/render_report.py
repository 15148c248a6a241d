"""Build the HTML report from the offline demo and look at it as a browser shows it.

    python docs/render_report.py [WORKDIR]

Runs `ucsj demo --workdir WORKDIR` (offline), a second judge (mlp), the analyses
(sample efficiency, importance, modules, decomposition), then `ucsj report --html` with their
plots, and saves a screenshot of the page in headless Chromium at 1280 px wide as
docs/report-screenshot.png. Needs Chromium (Debian: apt-get install chromium).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from PIL import Image

DOCS = Path(__file__).resolve().parent
WIDTH = 1280
TALL = 9000  # the window's height; the blank part below the page is cut off afterwards
TARGETS = ("fr", "de", "es", "hi")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
)


def ucsj(*args: object, cwd: Path) -> None:
    command = [sys.executable, "-m", "ucsj", *map(str, args)]
    print("$ ucsj", *map(str, args), flush=True)
    subprocess.run(command, cwd=cwd, check=True, stdout=subprocess.DEVNULL)


def build_report(work: Path) -> Path:
    ucsj("demo", "--workdir", work, "-q", cwd=work)
    ucsj("fit", "--train", "en.scores.jsonl", "--criteria", "criteria.json", "--module", "mlp",
         "-o", "mlp.skops", cwd=work)  # fmt: skip
    for lang in TARGETS:
        ucsj("predict", f"{lang}.scores.jsonl", "--judge", "mlp.skops",
             "-o", f"{lang}.mlp.jsonl", cwd=work)  # fmt: skip
    scores = [f"{lang}.scores.jsonl" for lang in TARGETS]
    targets = [word for s in scores for word in ("--targets", s)]
    common = ["--criteria", "criteria.json"]
    ucsj("analyze", "sample-efficiency", "--train", "en.scores.jsonl", *targets, *common,
         "--seeds", "3", "--plot", "efficiency.png", cwd=work)  # fmt: skip
    ucsj("analyze", "importance", "en.scores.jsonl", *scores, *common,
         "--plot", "alignment.png", "--heatmap", "heatmap.png", cwd=work)  # fmt: skip
    ucsj("analyze", "modules", "--train", "en.scores.jsonl", *targets, *common,
         "--plot", "modules.png", cwd=work)  # fmt: skip
    runs = ",".join(["criteria.json", "en.scores.jsonl", *scores])
    ucsj("analyze", "decomposition", "--run", f"per-criterion={runs}", "--cache-dir", "cache",
         "--plot", "decomposition.png", cwd=work)  # fmt: skip
    predictions = [f"{lang}.preds.jsonl" for lang in TARGETS]
    predictions += [f"{lang}.mlp.jsonl" for lang in TARGETS]
    figures = ["efficiency.png", "heatmap.png", "alignment.png", "modules.png", "decomposition.png"]
    page = work / "report.html"
    try:
        ucsj("report", *predictions, "--gate", "ba>=0.5", "--html", page,
             *(w for f in figures for w in ("--figure", f)), cwd=work)  # fmt: skip
    except subprocess.CalledProcessError as exc:
        if exc.returncode != 1:  # 1: a gate failed, which the page shows
            raise
    return page


def screenshot(page: Path, output: Path) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        sys.exit("Chromium is not installed (Debian: apt-get install chromium)")
    raw = output.with_suffix(".raw.png")
    subprocess.run(
        [browser, *CHROMIUM_FLAGS, f"--window-size={WIDTH},{TALL}", f"--screenshot={raw}",
         page.resolve().as_uri()],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120,
    )  # fmt: skip
    image = Image.open(raw).convert("RGB")
    background = image.getpixel((image.width - 1, image.height - 1))
    bottom = image.height
    while bottom > 1 and all(
        image.getpixel((x, bottom - 1)) == background for x in range(0, image.width, 4)
    ):
        bottom -= 1
    image.crop((0, 0, image.width, min(image.height, bottom + 24))).save(output, optimize=True)
    raw.unlink()
    print(f"screenshot: {output} ({image.width} x {bottom + 24} px)")


def main() -> None:
    if len(sys.argv) > 1:
        work = Path(sys.argv[1]).resolve()
        work.mkdir(parents=True, exist_ok=True)
        screenshot(build_report(work), DOCS / "report-screenshot.png")
        return
    with tempfile.TemporaryDirectory(prefix="ucsj-report-") as tmp:
        screenshot(build_report(Path(tmp)), DOCS / "report-screenshot.png")


if __name__ == "__main__":
    main()
