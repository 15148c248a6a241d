"""Label-free transfer shift and alignment on the synthetic lenient-judge case.

English (300 samples, pass rate 0.55) trains each of the six transfer modules; five target
languages of 150 samples each are judged with `--align none|standardize|prior`:

- de: answered like English;
- fr: the judge turns 50% of its "no" answers into "yes"; hi: 80% (as in issue 16);
- es: answered like English, but its outputs genuinely pass more often (0.85);
- pt: answered like English, but its outputs pass less often (0.25);
- ja: 90% of "no" turned into "yes" on the three Attribution questions only.

Signal criteria carry the label with a wide spread (P(yes) 0.85 or 0.15, give or take 0.7),
so an unbiased language scores BA ~0.94, the others overlap. Prints markdown tables: the shift
figures per language, then balanced accuracy per module, language and alignment.

    python bench/bench_shift.py
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from synth import lenient_scores, synthetic_criteria  # noqa: E402

from ucsj.metrics import balanced_accuracy  # noqa: E402
from ucsj.scores import score_record  # noqa: E402
from ucsj.shift import ALIGNMENTS, shift_report  # noqa: E402
from ucsj.transfer import MODULES, fit_judge, predict_records  # noqa: E402

SPREAD = 1.4
LANGS = {
    "de": {},
    "fr": {"lenient": 0.5},
    "hi": {"lenient": 0.8},
    "es": {"pass_rate": 0.85},
    "pt": {"pass_rate": 0.25},
    "ja": {"lenient": 0.9, "lenient_on": {"c1.q1", "c1.q2", "c1.q3"}},
}


def records(rows: list[dict]) -> list:
    return [score_record(row, "synthetic", i) for i, row in enumerate(rows, start=1)]


def _show(value: object) -> str:
    return "+".join(sorted(value)) if isinstance(value, set) else str(value)


def main() -> None:
    criteria = synthetic_criteria()
    english = records(lenient_scores("en", 300, spread=SPREAD))
    targets = records(
        [
            row
            for lang, options in LANGS.items()
            for row in lenient_scores(lang, 150, spread=SPREAD, **options)
        ]
    )
    judges = {name: fit_judge(english, criteria, module=name) for name in MODULES}

    shifts = shift_report(judges["logreg"], targets)
    print(
        "| lang | case | shift | most moved criterion | chance | unexplained | label-free "
        "| implied pass rate | warned |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for lang, options in LANGS.items():
        s = shifts.languages[lang]
        case = ", ".join(f"{k} {_show(v)}" for k, v in options.items()) or "as English"
        print(
            f"| {lang} | {case} | {s.shift:.3f} | {s.top[0].id} {s.top[0].shift:.3f} | "
            f"{s.chance:.3f} | {s.unexplained:.3f} | {s.label_free:.3f} | "
            f"{s.implied_pass_rate:.2f} | {'yes' if s.warn else 'no'} |"
        )

    print()
    print("| module | align | " + " | ".join(LANGS) + " |")
    print("|---|---|" + "---|" * len(LANGS))
    ranges: dict[tuple[str, str], list[float]] = {}
    for name, judge in judges.items():
        for align in ALIGNMENTS:
            rows = predict_records(judge, targets, align=align)
            cells = []
            for lang in LANGS:
                mine = [r for r in rows if r["lang"] == lang]
                ba = balanced_accuracy([r["label"] for r in mine], [r["pred"] for r in mine])
                ranges.setdefault((align, lang), []).append(ba)
                cells.append(f"{ba:.3f}")
            print(f"| {name} | {align} | " + " | ".join(cells) + " |")
    print()
    print("| align | " + " | ".join(LANGS) + " |")
    print("|---|" + "---|" * len(LANGS))
    for align in ALIGNMENTS:
        cells = [f"{min(ranges[align, lang]):.2f}-{max(ranges[align, lang]):.2f}" for lang in LANGS]
        print(f"| {align} (range over modules) | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
