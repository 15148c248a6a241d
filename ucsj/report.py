"""Per-language quality of one or more prediction files, quality gates, and their outputs."""

from __future__ import annotations

import html
import json
import math
import re
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from ucsj.errors import InputError
from ucsj.io import atomic_writer, read_json_lines
from ucsj.metrics import (
    ALL,
    LanguageMetrics,
    PairwiseMetrics,
    PointwiseMetrics,
    chosen_first_accuracy,
    language_metrics,
    pairwise_metrics,
    pointwise_metrics,
)
from ucsj.tasks import GOLD_FIELDS

# What a report measures, by the kind of task its predictions come from.
KIND_METRICS = {
    "binary": ("ba", "acc", "tpr", "tnr", "pass_rate", "unreadable", "error_rate", "n"),
    "pointwise": ("tau", "error_rate", "n"),
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
    "pointwise": (("error_rate", "no score"),),
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


METRICS = tuple(dict.fromkeys(m for metrics in KIND_METRICS.values() for m in metrics))
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
Metrics = LanguageMetrics | PointwiseMetrics | PairwiseMetrics


@dataclass(frozen=True)
class Gate:
    text: str
    metric: str
    group: str | None  # a language, pair, subset, "lang/subset" or "all"; None: every language
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

    def line(self) -> str:
        verdict = "passed" if self.passed else "FAILED"
        return (
            f"gate {verdict}: {self.gate.text} for {self.method} [{self.group}]: "
            f"{self.gate.metric} = {self.value:.4g}"
        )


@dataclass
class Report:
    kind: str  # binary, pointwise or pairwise
    methods: list[str]
    langs: list[str]  # the main groups: languages, or language pairs for pointwise
    breakdowns: list[str]  # further groups: pairwise subsets and language/subset
    table: dict[str, dict[str, Metrics]]  # method -> group -> metrics (ALL included)
    gates: list[GateResult]
    # baselines' own columns (EXTRA_COLUMNS): method -> group -> column -> value
    extras: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)

    @property
    def headline(self) -> str:
        return HEADLINE[self.kind]

    @property
    def failed_gates(self) -> list[GateResult]:
        return [g for g in self.gates if not g.passed]

    def best(self, group: str) -> str | None:
        scores = {
            m: self.table[m][group].value(self.headline)
            for m in self.methods
            if group in self.table[m]
        }
        scores = {m: v for m, v in scores.items() if not math.isnan(v)}
        return max(scores, key=scores.__getitem__) if scores else None


def row_kind(row: dict[str, Any]) -> str:
    """Pairwise rows carry a `preference`, pointwise rows a `score`; the rest are binary."""
    return "pairwise" if "preference" in row else "pointwise" if "score" in row else "binary"


def read_predictions(paths: list[Path]) -> tuple[str, dict[str, list[dict[str, Any]]]]:
    """The task kind and method -> rows, from one or more prediction files of one kind."""
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    kind: str | None = None
    for path in paths:
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
            grouped[row["method"]].append(row)
            count += 1
        if not count:
            raise InputError("no predictions: the file is empty", path=str(path))
    return kind or "binary", grouped


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


def build_report(paths: list[Path], gates: list[Gate] | None = None) -> Report:
    kind, grouped = read_predictions(paths)
    table: dict[str, dict[str, Metrics]] = {}
    extras: dict[str, dict[str, dict[str, float]]] = {}
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
        for name in groups:
            if name == ALL:
                continue
            (main if _is_main(kind, name, labelled) else breakdowns).add(name)
    if not main:
        raise InputError(
            f"no predictions with a gold '{GOLD_FIELDS[kind]}': report needs gold values to "
            "measure quality"
        )
    report = Report(
        kind,
        list(table),
        sorted(main, key=lambda g: (g != "en", g)),
        sorted(breakdowns, key=lambda g: ("/" in g, g)),
        table,
        [],
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


def check_gates(report: Report, gates: list[Gate]) -> list[GateResult]:
    results = []
    for gate in gates:
        if gate.metric not in KIND_METRICS[report.kind]:
            raise InputError(
                f"--gate '{gate.text}': {report.kind} predictions have no '{gate.metric}'; "
                f"use one of {', '.join(KIND_METRICS[report.kind])}"
            )
        for method in report.methods:
            groups = [gate.group] if gate.group else report.langs
            for group in groups:
                metrics = report.table[method].get(group)
                if metrics is None:
                    raise InputError(
                        f"--gate '{gate.text}': no predictions with gold values for "
                        f"'{group}' from method '{method}'"
                    )
                value = metrics.value(gate.metric)
                passed = not math.isnan(value) and _OPS[gate.op](value, gate.threshold)
                results.append(GateResult(gate, method, group, value, passed))
    return results


# -- outputs ----------------------------------------------------------------------------------


def headline(report: Report, metrics: Metrics) -> str:
    """The headline metric with its 95% interval, e.g. "0.812 [0.700, 0.900]"."""
    name = report.headline
    low, high = metrics.value(f"{name}_low"), metrics.value(f"{name}_high")
    return f"{fmt(metrics.value(name))} [{fmt(low)}, {fmt(high)}]"


def fmt(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:.3f}"


def to_json(report: Report) -> dict[str, Any]:
    def clean(m: Metrics) -> dict[str, Any]:
        return {
            k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(m).items()
        }

    return {
        "format": "ucsj.report/1",
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
        "best": {group: report.best(group) for group in [*report.langs, ALL]},
        "gates": [
            {
                "gate": g.gate.text,
                "method": g.method,
                "group": g.group,
                "value": None if math.isnan(g.value) else g.value,
                "passed": g.passed,
            }
            for g in report.gates
        ],
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
        for group in report.langs:
            m = report.table[method].get(group)
            if m is None:
                continue
            name = f"{group}: n={m.n} {report.headline}={m.value(report.headline):.4f}"
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
    lines.append("</testsuites>")
    with atomic_writer(path) as out:
        out.write("\n".join(lines) + "\n")


def write_html(report: Report, path: Path, figures: list[Path] | None = None) -> None:
    """One self-contained page: the methods x languages table, the gates and the analyses'
    PNG plots inlined (it opens with no network)."""
    import base64

    images = "".join(
        f'<figure><img alt="{html.escape(f.stem)}" src="data:image/png;base64,'
        f'{base64.b64encode(f.read_bytes()).decode()}"><figcaption>{html.escape(f.stem)}'
        "</figcaption></figure>"
        for f in figures or []
    )
    head = "".join(f"<th>{escape(lang)}</th>" for lang in [*report.langs, ALL])
    rows = []
    for method in report.methods:
        cells = []
        for lang in [*report.langs, ALL]:
            m = report.table[method].get(lang)
            if m is None:
                cells.append("<td>–</td>")
                continue
            best = report.best(lang) == method and len(report.methods) > 1
            value, interval = headline(report, m).split(" ", 1)
            text = f"{value}<br><small>{interval} n={m.n}</small>"
            cells.append(f"<td class={'best' if best else 'plain'}>{text}</td>")
        rows.append(f"<tr><th>{escape(method)}</th>{''.join(cells)}</tr>")
    gates = (
        "".join(
            f"<li class={'pass' if g.passed else 'fail'}>{html.escape(g.line())}</li>"
            for g in report.gates
        )
        or "<li>no gates</li>"
    )
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>ucsj report</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:.4em .7em;text-align:center}}.best{{font-weight:bold;
background:#e6f4ea}}.fail{{color:#b00020}}.pass{{color:#1e7e34}}</style></head><body>
<h1>ucsj report</h1><p>{HEADLINE_TITLE[report.kind]} per group (95% bootstrap interval); best
per column in bold.</p>
<table><tr><th>method</th>{head}</tr>{"".join(rows)}</table>
<h2>Gates</h2><ul>{gates}</ul>{"<h2>Analyses</h2>" + images if images else ""}</body></html>
"""
    with atomic_writer(path) as out:
        out.write(page)
