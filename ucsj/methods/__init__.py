"""The judges UCS is compared with (UCS paper, section 4 "Baselines", 5.5 and A.6; CE-Judge).

One module per method, each holding its whole protocol: prompts (ucsj/prompts/), calls and
aggregation. `base` gives them the client, cache, fencing and result type; `runner` runs a
method over a data file into predictions.
"""

from ucsj.methods.base import Context, Judgement, JudgeOptions
from ucsj.methods.chateval import aggregate_panel
from ucsj.methods.registry import METHOD_KINDS, METHODS, THRESHOLD_METHODS, check_method
from ucsj.methods.rocketeval import fit_reweighting
from ucsj.methods.runner import JudgeSummary, judge_file, judge_rows, judge_sample

__all__ = [
    "METHODS",
    "METHOD_KINDS",
    "THRESHOLD_METHODS",
    "Context",
    "JudgeOptions",
    "JudgeSummary",
    "Judgement",
    "aggregate_panel",
    "check_method",
    "fit_reweighting",
    "judge_file",
    "judge_rows",
    "judge_sample",
]
