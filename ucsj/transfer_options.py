"""The transfer modules' names and feature kinds, kept apart from scikit-learn.

The command line declares its choices from these at start-up; importing `ucsj.transfer`
(and with it scikit-learn) there would cost every `ucsj` call about a second.
"""

from __future__ import annotations

# The order of ucsj.transfer.MODULES and SCORE_MODULES (the A.3 modules), as --module lists it.
MODULE_NAMES = ("mlp", "logreg", "svm", "rf", "gb", "knn")
FEATURE_KINDS = ("concept", "criterion")
RANDOM_STATE = 42  # the A.3 modules' seed, and every other seeded draw of ucsj
