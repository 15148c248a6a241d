"""Thresholds for the checklist judges (rocketeval, checkeval): 0.5 unless calibrated on
labelled English data, where the threshold that maximizes balanced accuracy is taken (the
same English data UCS trains on, so neither side sees target-language labels)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ucsj.errors import InputError
from ucsj.metrics import balanced_accuracy

DEFAULT_THRESHOLD = 0.5


def choose_threshold(scores: Sequence[float], labels: Sequence[int]) -> float:
    """The pass threshold with the best balanced accuracy of `score >= threshold`.

    Candidates are the midpoints between neighbouring distinct scores and the ends; among
    equally good ones the one nearest 0.5 is taken (then the lowest), so the choice is
    deterministic and no further from the default than the data asks."""
    if len(set(labels)) < 2:
        raise InputError("--calibrate-on needs labelled samples of both classes")
    values = np.unique(np.asarray(scores, dtype=float))
    candidates = np.concatenate(
        [[values[0]], (values[:-1] + values[1:]) / 2, [np.nextafter(values[-1], np.inf)]]
    )
    y = np.asarray(labels)
    best = max(
        candidates,
        key=lambda t: (
            balanced_accuracy(y, (np.asarray(scores) >= t).astype(int)),
            -abs(t - DEFAULT_THRESHOLD),
            -t,
        ),
    )
    return float(best)


def checklist_scores(rows: list[dict]) -> tuple[list[float], list[int]]:
    """(unweighted mean item score, label) of the labelled rows with a readable item."""
    scores, labels = [], []
    for row in rows:
        items = [v for v in row.get("items") or [] if v is not None]
        if row.get("label") is None or not items:
            continue
        scores.append(float(np.mean(items)))
        labels.append(int(row["label"]))
    return scores, labels
