"""Per-language quality of one or more prediction files, quality gates, and their outputs."""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

import numpy as np

from ucsj.errors import InputError
from ucsj.io import atomic_writer, read_json_lines
from ucsj.languages import is_language_code
from ucsj.metrics import (
    ALL,
    AVG,
    AverageMetrics,
    LanguageMetrics,
    PairwiseMetrics,
    PointwiseMetrics,
    average_interval,
    average_metrics,
    balanced_accuracy,
    binary_verdicts,
    chosen_first_accuracy,
    kendall_tau,
    language_metrics,
    pairs_right,
    pairwise_metrics,
    pointwise_metrics,
    scores_with_missing_as_wrong,
)
from ucsj.shift import ShiftReport
from ucsj.tasks import GOLD_FIELDS

# What a report measures, by the kind of task its predictions come from.
KIND_METRICS = {
    "binary": ("ba", "acc", "tpr", "tnr", "pass_rate", "unreadable", "error_rate", "n"),
    "pointwise": ("tau", "tau_scored", "error_rate", "n"),
    "pairwise": ("acc", "consistency", "position_bias", "error_rate", "n"),
}
HEADLINE = {"binary": "ba", "pointwise": "tau", "pairwise": "acc"}
HEADLINE_TITLE = {
    "binary": "Balanced accuracy",
    "pointwise": "Kendall's tau",
    "pairwise": "Pairwise accuracy over both orders",
}
# The other columns of the console table per method: (metric, heading).
DETAIL_COLUMNS = {
    "binary": (
        ("acc", "acc"),
        ("tpr", "TPR"),
        ("tnr", "TNR"),
        ("pass_rate", "pass rate"),
        ("unreadable", "unreadable"),
        ("error_rate", "no verdict"),
    ),
    "pointwise": (("tau_scored", "tau of scored"), ("error_rate", "no score")),
    "pairwise": (
        ("consistency", "same both orders"),
        ("position_bias", "picks first"),
        ("error_rate", "no verdict"),
    ),
}


def _cut_off_share(rows: list[dict[str, Any]]) -> float:
    return sum(bool(r.get("cut_off")) for r in rows) / len(rows)


def _chosen_first_accuracy(rows: list[dict[str, Any]]) -> float:
    return chosen_first_accuracy(
        [r["preference"] for r in rows],
        [r.get("pred") for r in rows],
        [r.get("pred_swapped") for r in rows],
    )


# Columns only baselines' predictions carry: (heading, value over a group's rows). cut_off:
# share of samples with a free-text reply stopped by its cap. acc_chosen_first: pairwise
# accuracy in the order the CE-Judge paper uses (the chosen response shown first).
EXTRA_COLUMNS = {
    "cut_off": ("cut off", _cut_off_share),
    "acc_chosen_first": ("chosen first (paper)", _chosen_first_accuracy),
}


def _extra_columns(kind: str, rows: list[dict[str, Any]]) -> list[str]:
    if not any("cut_off" in r for r in rows):
        return []
    return ["acc_chosen_first", "cut_off"] if kind == "pairwise" else ["cut_off"]


# Gated from the judge's English answer reference and the languages' scores (report --judge).
SHIFT = "shift"
METRICS = (
    *dict.fromkeys(m for metrics in KIND_METRICS.values() for m in metrics),
    SHIFT,
)
_GATE = re.compile(
    r"^\s*([a-z_]+)\s*(?:\[\s*([\w./-]+)\s*\])?\s*(>=|<=|>|<|==)\s*"
    r"(-?[0-9]*\.?[0-9]+)\s*$"
)
_OPS = {
    ">=": lambda a, b: a >= b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    "<": lambda a, b: a < b,
    "==": lambda a, b: a == b,
}
Metrics = LanguageMetrics | PointwiseMetrics | PairwiseMetrics | AverageMetrics


@dataclass(frozen=True)
class Gate:
    text: str
    metric: str
    group: str | None  # a language, pair, subset, "lang/subset", "avg" or "all"; None: every
    # language
    op: str
    threshold: float


def parse_gate(text: str) -> Gate:
    match = _GATE.match(text)
    if not match or match.group(1) not in METRICS:
        raise InputError(
            f"bad --gate '{text}': expected METRIC[GROUP]>=VALUE with METRIC one of "
            f'{", ".join(METRICS)}, e.g. "ba>=0.75", "ba[fr]>=0.8", "tau[de-en]>=0.3" or '
            '"acc[fr/chat]>=0.7"'
        )
    metric, group, op, value = match.groups()
    return Gate(text.strip(), metric, group, op, float(value))


@dataclass(frozen=True)
class GateResult:
    gate: Gate
    method: str
    group: str
    value: float
    passed: bool
    undefined: str | None = None  # why the metric has no value (the gate then fails)

    def line(self) -> str:
        verdict = "passed" if self.passed else "FAILED"
        where = f"gate {verdict}: {self.gate.text} for {self.method} [{self.group}]: "
        if self.undefined:
            return f"{where}{self.gate.metric} is undefined ({self.undefined})"
        return f"{where}{self.gate.metric} = {self.value:.4g}"


@dataclass
class Report:
    kind: str  # binary, pointwise or pairwise
    methods: list[str]
    langs: list[str]  # the main groups: languages, or language pairs for pointwise
    breakdowns: list[str]  # further groups: pairwise subsets and language/subset
    table: dict[str, dict[str, Metrics]]  # method -> group -> metrics (ALL and AVG included)
    gates: list[GateResult]
    shift: ShiftReport | None = None  # the answers' shift per language (report --judge)
    shift_source: str = "judge"  # names the judge in gate lines
    # baselines' own columns (EXTRA_COLUMNS): method -> group -> column -> value
    extras: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)

    @property
    def headline(self) -> str:
        return HEADLINE[self.kind]

    @property
    def failed_gates(self) -> list[GateResult]:
        return [g for g in self.gates if not g.passed]

    @property
    def columns(self) -> list[str]:
        """The groups of the methods x languages table: each language, avg, all."""
        return [*self.langs, AVG, ALL]

    def best(self, group: str) -> list[str]:
        """Every method with the best defined headline value in `group` (ties all count)."""
        scores = {
            m: self.table[m][group].value(self.headline)
            for m in self.methods
            if group in self.table[m]
        }
        scores = {m: v for m, v in scores.items() if not math.isnan(v)}
        if not scores:
            return []
        top = max(scores.values())
        return [m for m, v in scores.items() if math.isclose(v, top, rel_tol=1e-12, abs_tol=0)]


def row_kind(row: dict[str, Any]) -> str:
    """Pairwise rows carry a `preference`, pointwise rows a `score`; the rest are binary."""
    return "pairwise" if "preference" in row else "pointwise" if "score" in row else "binary"


def read_predictions(paths: list[Path]) -> tuple[str, dict[str, list[dict[str, Any]]]]:
    """The task kind and method -> rows, from one or more prediction files of one kind.

    A method's rows may be spread over files (one per language). When two files hold rows of
    one method for the same ids they are two runs (e.g. `rocketeval` calibrated and not): each
    file's rows of that method are then named after the file, "method (file.jsonl)"."""
    kind: str | None = None
    per_file: list[tuple[Path, dict[str, list[dict[str, Any]]]]] = []
    given: dict[Path, Path] = {}
    for path in paths:
        resolved = Path(path).resolve()
        if resolved in given:
            raise InputError(
                f"given twice (also as '{given[resolved]}'): its rows would count twice",
                path=str(path),
            )
        given[resolved] = path
        grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
        first_line: dict[tuple[str, str], int] = {}
        count = 0
        for line, row in read_json_lines(path):
            _check_prediction(row, str(path), line)
            if kind is None:
                kind = row_kind(row)
            elif row_kind(row) != kind:
                raise InputError(
                    f"a {row_kind(row)} prediction among {kind} ones: report one kind of task "
                    "at a time",
                    path=str(path),
                    line=line,
                )
            key = (row["method"], row["id"])
            if key in first_line:
                raise InputError(
                    f"duplicate id '{row['id']}' for method '{row['method']}' (first on line "
                    f"{first_line[key]}): each sample is counted once",
                    path=str(path),
                    line=line,
                )
            first_line[key] = line
            grouped[row["method"]].append(row)
            count += 1
        if not count:
            raise InputError("no predictions: the file is empty", path=str(path))
        per_file.append((path, grouped))
    return kind or "binary", _merge_methods(per_file)


def _merge_methods(
    per_file: list[tuple[Path, dict[str, list[dict[str, Any]]]]],
) -> dict[str, list[dict[str, Any]]]:
    """One method's rows from every file, unless two files hold the same ids for it."""
    names = [path.name for path, _ in per_file]
    label = {
        str(path): (path.name if names.count(path.name) == 1 else str(path)) for path, _ in per_file
    }
    methods = list(dict.fromkeys(m for _, grouped in per_file for m in grouped))
    merged: dict[str, list[dict[str, Any]]] = {}
    for method in methods:
        parts = [(path, grouped[method]) for path, grouped in per_file if method in grouped]
        ids = [r["id"] for _, rows in parts for r in rows]
        if len(ids) == len(set(ids)):
            merged[method] = [r for _, rows in parts for r in rows]
            continue
        for path, rows in parts:
            name = f"{method} ({label[str(path)]})"
            merged[name] = [{**r, "method": name} for r in rows]
    return merged


def _check_prediction(row: Any, path: str, line: int) -> None:
    if not isinstance(row, dict):
        raise InputError("record is not a JSON object", path=path, line=line)
    for name in ("id", "lang", "method"):
        if not isinstance(row.get(name), str):
            raise InputError(
                "missing or not a string (is this a predictions file?)",
                path=path,
                line=line,
                field=name,
            )
    if not is_language_code(row["lang"]):  # as `score` checks samples: "FR" is not "fr"
        raise InputError(
            f"'{row['lang']}' is not an ISO 639-1 language code", path=path, line=line, field="lang"
        )
    kind = row_kind(row)
    if kind == "pairwise" and "pred_swapped" not in row:
        raise InputError(
            "pairwise predictions need the verdict of both orders ('pred' and 'pred_swapped')",
            path=path,
            line=line,
            field="pred_swapped",
        )
    for name in ("pred", *(("pred_swapped",) if kind == "pairwise" else ()), GOLD_FIELDS[kind]):
        value = row.get(name)
        if not _valid(kind, name, value):
            raise InputError(
                f"must be {_EXPECTED[kind]}, got {value!r}", path=path, line=line, field=name
            )
    prob = row.get("prob")
    if prob is not None and not _fraction(prob):
        raise InputError(
            f"must be a probability from 0 to 1 or null, got {prob!r}",
            path=path,
            line=line,
            field="prob",
        )
    unreadable = row.get("unreadable")
    if unreadable is not None and not _fraction(unreadable):
        raise InputError(
            f"must be a share from 0 to 1 or null, got {unreadable!r}",
            path=path,
            line=line,
            field="unreadable",
        )


def _fraction(value: Any) -> bool:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return number and 0 <= value <= 1


_EXPECTED = {
    "binary": "0, 1 or null",
    "pointwise": "a number or null",
    "pairwise": '"a", "b" or null',
}


def _valid(kind: str, name: str, value: Any) -> bool:
    if value is None:
        return True
    if kind == "binary":
        return value in (0, 1) and not isinstance(value, float)
    if kind == "pointwise":
        number = isinstance(value, int | float) and not isinstance(value, bool)
        return number and (name == "pred" or isinstance(value, int)) and math.isfinite(value)
    return value in ("a", "b")


def build_report(
    paths: list[Path],
    gates: list[Gate] | None = None,
    shift: ShiftReport | None = None,
    shift_source: str = "judge",
) -> Report:
    kind, grouped = read_predictions(paths)
    table: dict[str, dict[str, Metrics]] = {}
    extras: dict[str, dict[str, dict[str, float]]] = {}
    by_main: dict[str, dict[str, list[dict[str, Any]]]] = {}
    main: set[str] = set()
    breakdowns: set[str] = set()
    for method, rows in grouped.items():
        labelled = [r for r in rows if r.get(GOLD_FIELDS[kind]) is not None]
        groups = _groups(kind, labelled)
        table[method] = {name: _metrics(kind, name, members) for name, members in groups.items()}
        columns = _extra_columns(kind, labelled)
        if columns:
            extras[method] = {
                name: {column: EXTRA_COLUMNS[column][1](members) for column in columns}
                for name, members in groups.items()
            }
        by_main[method] = {}
        for name in groups:
            if name == ALL:
                continue
            if _is_main(kind, name, labelled):
                main.add(name)
                by_main[method][name] = [r for r in labelled if _group_keys(kind, r)[0] == name]
            else:
                breakdowns.add(name)
    if not main:
        raise InputError(
            f"no predictions with a gold '{GOLD_FIELDS[kind]}': report needs gold values to "
            "measure quality"
        )
    langs = sorted(main, key=lambda g: (g != "en", g))
    for method in table:
        table[method][AVG] = _average(kind, langs, table[method], by_main[method])
    for shares in extras.values():  # the average over languages, as for the metrics
        per_lang = [shares.get(lang) for lang in langs]
        shares[AVG] = {
            column: float(np.mean([p[column] for p in per_lang])) if all(per_lang) else math.nan
            for column in next(iter(shares.values()))
        }
    report = Report(
        kind,
        list(table),
        langs,
        sorted(breakdowns, key=lambda g: ("/" in g, g)),
        table,
        [],
        shift,
        shift_source,
        extras,
    )
    report.gates = check_gates(report, gates or [])
    return report


def _group_keys(kind: str, row: dict[str, Any]) -> list[str]:
    if kind == "pointwise":
        return [row.get("pair") or row["lang"]]
    keys = [row["lang"]]
    if kind == "pairwise" and row.get("subset"):
        keys += [row["subset"], f"{row['lang']}/{row['subset']}"]
    return keys


def _is_main(kind: str, name: str, rows: list[dict[str, Any]]) -> bool:
    return any(_group_keys(kind, r)[0] == name for r in rows)


def _groups(kind: str, rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        for key in _group_keys(kind, row):
            groups[key].append(row)
    if rows:
        groups[ALL] = rows
    return dict(sorted(groups.items()))


def _metrics(kind: str, group: str, rows: list[dict[str, Any]]) -> Metrics:
    if kind == "pointwise":
        return pointwise_metrics(group, [r["score"] for r in rows], [r.get("pred") for r in rows])
    if kind == "pairwise":
        return pairwise_metrics(
            [r["preference"] for r in rows],
            [r.get("pred") for r in rows],
            [r.get("pred_swapped") for r in rows],
            group,
        )
    return language_metrics(
        group,
        [r["label"] for r in rows],
        [r.get("pred") for r in rows],
        [float(r.get("unreadable") or 0.0) for r in rows],
    )


def _average(
    kind: str,
    langs: list[str],
    metrics: dict[str, Metrics],
    rows: dict[str, list[dict[str, Any]]],
) -> AverageMetrics:
    """The unweighted mean over the report's languages, with a stratified bootstrap interval
    of the headline's mean."""
    present = {lang: metrics[lang] for lang in langs if lang in metrics}
    statistics = [_headline_statistic(kind, rows[lang]) for lang in langs if lang in rows]
    interval = average_interval(statistics) if len(present) == len(langs) else (math.nan,) * 2
    names = [m for m in KIND_METRICS[kind] if m != "n"]
    return average_metrics(present, langs, names, HEADLINE[kind], interval)


def _headline_statistic(kind: str, rows: list[dict[str, Any]]) -> tuple[int, Any]:
    """(n, the headline metric of the rows at given indices), as `_metrics` computes it."""
    if kind == "pointwise":
        gold = np.asarray([r["score"] for r in rows], dtype=float)
        pred = scores_with_missing_as_wrong(list(gold), [r.get("pred") for r in rows])
        return len(rows), lambda idx: kendall_tau(gold[idx], pred[idx])
    if kind == "pairwise":
        right = pairs_right(
            [r["preference"] for r in rows],
            [r.get("pred") for r in rows],
            [r.get("pred_swapped") for r in rows],
        )
        return len(rows), lambda idx: float(np.mean(right[idx]))
    y = np.asarray([r["label"] for r in rows], dtype=int)
    p = binary_verdicts(y, [r.get("pred") for r in rows])
    return len(rows), lambda idx: balanced_accuracy(y[idx], p[idx])


def check_gates(report: Report, gates: list[Gate]) -> list[GateResult]:
    results = []
    for gate in gates:
        if gate.metric == SHIFT:
            results += _shift_gate(report, gate)
            continue
        if gate.metric not in KIND_METRICS[report.kind]:
            raise InputError(
                f"--gate '{gate.text}': {report.kind} predictions have no '{gate.metric}'; "
                f"use one of {', '.join(KIND_METRICS[report.kind])}"
            )
        if gate.group and not any(gate.group in report.table[m] for m in report.methods):
            raise InputError(
                f"--gate '{gate.text}': no method has predictions with gold values for "
                f"'{gate.group}'"
            )
        for method in report.methods:
            # without a group: the languages this method has (methods may cover different ones)
            groups = (
                [gate.group]
                if gate.group
                else [lang for lang in report.langs if lang in report.table[method]]
            )
            for group in groups:
                metrics = report.table[method].get(group)
                if metrics is None:  # named explicitly, and this method lacks it
                    why = f"no predictions with gold values for '{group}' from method '{method}'"
                    results.append(GateResult(gate, method, group, math.nan, False, why))
                    continue
                value = metrics.value(gate.metric)
                if math.isnan(value):  # undefined is never good enough
                    why = metrics.undefined.get(gate.metric, "no value")
                    results.append(GateResult(gate, method, group, value, False, why))
                    continue
                passed = _OPS[gate.op](value, gate.threshold)
                results.append(GateResult(gate, method, group, value, passed))
    return results


def _shift_gate(report: Report, gate: Gate) -> list[GateResult]:
    if report.shift is None:
        raise InputError(
            f"--gate '{gate.text}': the shift needs the judge and the languages' scores "
            "(--judge judge.skops --scores SCORES)"
        )
    groups = [gate.group] if gate.group else list(report.shift.languages)
    results = []
    for group in groups:
        if group not in report.shift.languages:
            raise InputError(f"--gate '{gate.text}': no scores in '{group}' among --scores")
        value = report.shift.languages[group].shift
        if math.isnan(value):  # undefined is never good enough
            why = "no readable answers to compare with the reference"
            results.append(GateResult(gate, report.shift_source, group, value, False, why))
            continue
        passed = _OPS[gate.op](value, gate.threshold)
        results.append(GateResult(gate, report.shift_source, group, value, passed))
    return results


# -- outputs ----------------------------------------------------------------------------------


def headline(report: Report, metrics: Metrics) -> str:
    """The headline metric with its 95% interval, e.g. "0.812 [0.700, 0.900]"."""
    name = report.headline
    low, high = metrics.value(f"{name}_low"), metrics.value(f"{name}_high")
    return f"{fmt(metrics.value(name))} [{fmt(low)}, {fmt(high)}]"


def no_verdict_at_all(metrics: Metrics) -> bool:
    """Every sample of the group lacks a verdict: its numbers say nothing about quality."""
    return metrics.n > 0 and metrics.value("error_rate") >= 1.0


def fmt(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.3f}"


def undefined_notes(report: Report) -> list[str]:
    """One line per undefined metric of the report: method, group, metric and why."""
    notes = []
    shown = set(KIND_METRICS[report.kind])
    for method in report.methods:
        for group in [*report.langs, *report.breakdowns, AVG, ALL]:
            m = report.table[method].get(group)
            for metric, why in m.undefined.items() if m is not None else ():
                if metric in shown:
                    notes.append(f"{method} [{group}]: {metric} n/a: {why}")
    return notes


def to_json(report: Report) -> dict[str, Any]:
    def clean(m: Metrics) -> dict[str, Any]:
        fields = asdict(m)
        if isinstance(m, AverageMetrics):  # flat, like the per-language entries
            values = fields.pop("values")
            low, high, name = fields.pop("low"), fields.pop("high"), fields.pop("headline")
            fields.update(values)
            fields.update({f"{name}_low": low, f"{name}_high": high})
        return {
            k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in fields.items()
        }

    return {
        # /2: an "avg" group, "best" lists every tied method, undefined metrics are null with
        # their reason under "undefined"
        "format": "ucsj.report/2",
        "kind": report.kind,
        "headline": report.headline,
        "languages": report.langs,
        "breakdowns": report.breakdowns,
        "methods": {
            m: {
                group: clean(v) | _extra_fields(report, m, group)
                for group, v in report.table[m].items()
            }
            for m in report.methods
        },
        "best": {group: report.best(group) for group in report.columns},
        "gates": [
            {
                "gate": g.gate.text,
                "method": g.method,
                "group": g.group,
                "value": None if math.isnan(g.value) else g.value,
                "passed": g.passed,
                **({"undefined": g.undefined} if g.undefined else {}),
            }
            for g in report.gates
        ],
        "shift": None if report.shift is None else report.shift.to_json(),
        "passed": not report.failed_gates,
    }


def _extra_fields(report: Report, method: str, group: str) -> dict[str, float]:
    return report.extras.get(method, {}).get(group, {})


def write_json_report(report: Report, path: Path) -> None:
    with atomic_writer(path) as out:
        json.dump(to_json(report), out, ensure_ascii=False, indent=2)
        out.write("\n")


def write_junit(report: Report, path: Path) -> None:
    """A testsuite per method: a case per language (has a verdict) and per gate result."""
    lines = ['<?xml version="1.0" encoding="UTF-8"?>', "<testsuites>"]
    for method in report.methods:
        cases = []
        for group in [*report.langs, AVG]:
            m = report.table[method].get(group)
            if m is None:
                continue
            value = m.value(report.headline)
            shown = "n/a" if math.isnan(value) else f"{value:.4f}"
            name = f"{group}: n={m.n} {report.headline}={shown}"
            cases.append(
                f"    <testcase classname={quoteattr('ucsj.' + method)} name={quoteattr(name)}/>"
            )
        for g in (g for g in report.gates if g.method == method):
            body = "" if g.passed else f"<failure message={quoteattr(g.line())}/>"
            cases.append(
                f"    <testcase classname={quoteattr('ucsj.' + method + '.gates')} "
                f"name={quoteattr(f'{g.gate.text} [{g.group}]')}>{body}</testcase>"
            )
        failures = sum(1 for g in report.gates if g.method == method and not g.passed)
        lines.append(
            f'  <testsuite name={quoteattr(method)} tests="{len(cases)}" failures="{failures}">'
        )
        lines += cases
        lines.append("  </testsuite>")
    shift_gates = [g for g in report.gates if g.gate.metric == SHIFT]
    if shift_gates:
        failures = sum(not g.passed for g in shift_gates)
        lines.append(f'  <testsuite name="shift" tests="{len(shift_gates)}" failures="{failures}">')
        for g in shift_gates:
            body = "" if g.passed else f"<failure message={quoteattr(g.line())}/>"
            lines.append(
                f'    <testcase classname="ucsj.shift" '
                f"name={quoteattr(f'{g.gate.text} [{g.group}]')}>{body}</testcase>"
            )
    lines.append("</testsuites>")
    with atomic_writer(path) as out:
        out.write("\n".join(lines) + "\n")
