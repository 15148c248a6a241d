"""How stable is `fit --module auto`, and how well does the module it picks carry over?

On SETS simulated English training sets of MEMERAG's size (387 samples, two of six concepts
carrying a noisy label signal), each with two simulated target languages (one noisier, one
whose judge is lenient on one signal concept), compare:
- the previous rule: the best balanced accuracy on one seeded, stratified 75/25 split;
- the current rule (`ucsj.transfer.choose_module`): 5 folds x 3 repeats, one-standard-error
  rule toward the simplest module.
For each it counts the modules chosen and the average over the target languages of the
chosen module's balanced accuracy (trained on all English), against the best module's.

    python bench/bench_module_choice.py 30
"""

from __future__ import annotations

import math
import sys
import time
import warnings
from collections import Counter

import numpy as np
from sklearn.model_selection import train_test_split

from ucsj.metrics import balanced_accuracy
from ucsj.transfer import MODULES, choose_module, decide, fit_module

CONCEPTS = 6
SIGNAL = (0, 1)


def simulate(rng: np.random.Generator, n: int, noise: float, lenient: float = 0.0):
    labels = (rng.uniform(size=n) < 0.6).astype(int)
    x = rng.uniform(size=(n, CONCEPTS))
    for c in SIGNAL:
        x[:, c] = 0.5 + 0.12 * (2 * labels - 1) + rng.normal(0, noise, n)
    x[:, SIGNAL[0]] += lenient  # a judge that says "yes" more in this language
    return np.clip(x, 0, 1), labels


def single_split_choice(x: np.ndarray, y: np.ndarray) -> str:
    """The rule ucsj used before: argmax of BA on one 75/25 split, ties to the first listed."""
    x_t, x_v, y_t, y_v = train_test_split(x, y, test_size=0.25, stratify=y, random_state=42)
    table = {}
    for name, make in MODULES.items():
        table[name] = balanced_accuracy(y_v, fit_module(make(), x_t, y_t).predict(x_v))
    return max(table, key=lambda n: -math.inf if math.isnan(table[n]) else table[n])


def main(sets: int) -> None:
    warnings.filterwarnings("ignore")
    old_counts: Counter[str] = Counter()
    new_counts: Counter[str] = Counter()
    old_ba, new_ba, best_ba, mlp_ba = [], [], [], []
    started = time.perf_counter()
    for i in range(sets):
        rng = np.random.default_rng(1000 + i)
        x, y = simulate(rng, 387, 0.2)
        targets = [simulate(rng, 300, 0.25), simulate(rng, 300, 0.2, lenient=0.1)]
        transfer = {}
        for name, make in MODULES.items():
            model = fit_module(make(), x, y)
            transfer[name] = float(
                np.mean([balanced_accuracy(yt, decide([model], xt).pred) for xt, yt in targets])
            )
        old, new = single_split_choice(x, y), choose_module(x, y).module
        old_counts[old] += 1
        new_counts[new] += 1
        old_ba.append(transfer[old])
        new_ba.append(transfer[new])
        best_ba.append(max(transfer.values()))
        mlp_ba.append(transfer["mlp"])
    seconds = time.perf_counter() - started
    print(f"{sets} sets, {seconds:.0f} s")
    print("| rule | modules chosen | mean transfer BA of the chosen (avg over 2 targets) |")
    print("|---|---|---|")
    for rule, counts, values in (
        ("one 75/25 split (before)", old_counts, old_ba),
        ("5x3 CV + one-SE rule (now)", new_counts, new_ba),
    ):
        chosen = ", ".join(f"{m} {c}" for m, c in counts.most_common())
        print(f"| {rule} | {chosen} | {np.mean(values):.4f} (sd {np.std(values):.4f}) |")
    print(f"| always mlp (the paper's A.3 choice) | mlp {sets} | {np.mean(mlp_ba):.4f} |")
    print(f"| best module per set (oracle) | | {np.mean(best_ba):.4f} |")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
