"""Draw docs/shift.png for the README: the answer shift heat map of bench/bench_shift.py's
synthetic case (English reference; de as English, fr and hi with a lenient judge, es and pt
with a different true pass rate, ja lenient on the Attribution questions only).

    python docs/make_shift_plot.py
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "bench"))
sys.path.insert(0, str(HERE.parent / "tests"))

from bench_shift import LANGS, SPREAD, records  # noqa: E402
from synth import lenient_scores, synthetic_criteria  # noqa: E402

from ucsj.plots import plot_shift  # noqa: E402
from ucsj.shift import shift_report  # noqa: E402
from ucsj.transfer import fit_judge  # noqa: E402

english = records(lenient_scores("en", 300, spread=SPREAD))
targets = records(
    [
        row
        for lang, options in LANGS.items()
        for row in lenient_scores(lang, 150, spread=SPREAD, **options)
    ]
)
judge = fit_judge(english, synthetic_criteria(), module="logreg")
plot_shift(shift_report(judge, targets), HERE / "shift.png")
