"""The transfer modules' names and feature kinds, kept apart from scikit-learn.

The command line declares its choices from these at start-up; importing `ucsj.transfer`
(and with it scikit-learn) there would cost every `ucsj` call about a second.
"""

from __future__ import annotations

# Order breaks ties in --module auto (ucsj.transfer.MODULES follows it).
MODULE_NAMES = ("mlp", "logreg", "svm", "rf", "gb", "knn")
FEATURE_KINDS = ("concept", "criterion")
