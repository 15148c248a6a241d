"""The methods by name, and the task kinds each judges."""

from __future__ import annotations

from ucsj.errors import InputError
from ucsj.methods.base import MethodFn
from ucsj.methods.ce_judge import ce_judge
from ucsj.methods.chateval import chateval
from ucsj.methods.checkeval import checkeval
from ucsj.methods.cot import cot
from ucsj.methods.guidelines import guidelines
from ucsj.methods.llm_aggregator import llm_aggregator
from ucsj.methods.rocketeval import rocketeval
from ucsj.methods.zero_shot import zero_shot
from ucsj.tasks import Task

METHODS: dict[str, MethodFn] = {
    "zero-shot": zero_shot,
    "cot": cot,
    "guidelines": guidelines,
    "llm-aggregator": llm_aggregator,
    "chateval": chateval,
    "rocketeval": rocketeval,
    "checkeval": checkeval,
    "ce-judge": ce_judge,
}
THRESHOLD_METHODS = ("rocketeval", "checkeval")
# Task kinds each method judges; the others ask a yes/no question.
METHOD_KINDS = {name: ("binary",) for name in METHODS} | {
    "zero-shot": ("binary", "pointwise", "pairwise"),
    "ce-judge": ("binary", "pointwise", "pairwise"),
}


def check_method(method: str, task: Task) -> None:
    if method not in METHODS:
        raise InputError(f"--method must be one of {', '.join(METHODS)}")
    if task.kind not in METHOD_KINDS[method]:
        able = [m for m, kinds in METHOD_KINDS.items() if task.kind in kinds]
        raise InputError(
            f"task '{task.name}' is {task.kind}: {method} judges binary tasks only; "
            f"for {task.kind} tasks use {', '.join(able)} (or UCS: score, fit, predict)"
        )
