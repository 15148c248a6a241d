"""Draw docs/sample-efficiency.png for the README: synthetic scores in which one criterion
carries a noisy label signal, English 300 samples, French and German 200 each.

    python docs/make_readme_plot.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from test_analysis import CRITERIA, make_scores  # noqa: E402

from ucsj.analysis import sample_efficiency  # noqa: E402
from ucsj.plots import plot_efficiency  # noqa: E402
from ucsj.scores import read_scores  # noqa: E402

with tempfile.TemporaryDirectory() as tmp:
    tmp = Path(tmp)
    english = read_scores(make_scores(tmp / "en.jsonl", "en", 300, 1, noise=0.6))
    targets = [
        r
        for seed, lang in ((2, "fr"), (3, "de"))
        for r in read_scores(make_scores(tmp / f"{lang}.jsonl", lang, 200, seed, noise=0.6))
    ]
    points = sample_efficiency(english, targets, CRITERIA, module="mlp", seeds=5)
    plot_efficiency(points, HERE / "sample-efficiency.png")
