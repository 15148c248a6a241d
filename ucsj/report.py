"""Per-language quality of one or more prediction files, quality gates, and their outputs."""

from __future__ import annotations

import html
import json
import math
import re
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from ucsj.errors import InputError
from ucsj.io import atomic_writer, read_json_lines
from ucsj.metrics import LanguageMetrics, language_metrics

METRICS = ("ba", "acc", "tpr", "tnr", "pass_rate", "unreadable", "error_rate", "n")
ALL = "all"  # pooled over languages
_GATE = re.compile(
    r"^\s*([a-z_]+)\s*(?:\[\s*([a-z]{2}|all)\s*\])?\s*(>=|<=|>|<|==)\s*"
    r"([0-9]*\.?[0-9]+)\s*$"
)
_OPS = {
    ">=": lambda a, b: a >= b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    "<": lambda a, b: a < b,
    "==": lambda a, b: a == b,
}


@dataclass(frozen=True)
class Gate:
    text: str
    metric: str
    lang: str | None  # None: every language
    op: str
    threshold: float


def parse_gate(text: str) -> Gate:
    match = _GATE.match(text)
    if not match or match.group(1) not in METRICS:
        raise InputError(
            f"bad --gate '{text}': expected METRIC[LANG]>=VALUE with METRIC one of "
            f'{", ".join(METRICS)}, e.g. "ba>=0.75" or "ba[fr]>=0.8"'
        )
    metric, lang, op, value = match.groups()
    return Gate(text.strip(), metric, lang, op, float(value))


@dataclass(frozen=True)
class GateResult:
    gate: Gate
    method: str
    lang: str
    value: float
    passed: bool

    def line(self) -> str:
        verdict = "passed" if self.passed else "FAILED"
        return (
            f"gate {verdict}: {self.gate.text} for {self.method} [{self.lang}]: "
            f"{self.gate.metric} = {self.value:.4g}"
        )


@dataclass
class Report:
    methods: list[str]
    langs: list[str]
    table: dict[str, dict[str, LanguageMetrics]]  # method -> lang -> metrics (ALL included)
    gates: list[GateResult]

    @property
    def failed_gates(self) -> list[GateResult]:
        return [g for g in self.gates if not g.passed]

    def best(self, lang: str) -> str | None:
        scores = {m: self.table[m][lang].ba for m in self.methods if lang in self.table[m]}
        scores = {m: v for m, v in scores.items() if not math.isnan(v)}
        return max(scores, key=scores.__getitem__) if scores else None


def read_predictions(paths: list[Path]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """method -> lang -> rows, from one or more prediction files."""
    grouped: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for path in paths:
        count = 0
        for line, row in read_json_lines(path):
            _check_prediction(row, str(path), line)
            grouped[row["method"]][row["lang"]].append(row)
            count += 1
        if not count:
            raise InputError("no predictions: the file is empty", path=str(path))
    return grouped


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
    if row.get("pred") not in (None, 0, 1):
        raise InputError(
            f"must be 0, 1 or null, got {row.get('pred')!r}", path=path, line=line, field="pred"
        )
    if row.get("label") not in (None, 0, 1):
        raise InputError(
            f"must be 0, 1 or null, got {row.get('label')!r}", path=path, line=line, field="label"
        )


def build_report(paths: list[Path], gates: list[Gate] | None = None) -> Report:
    grouped = read_predictions(paths)
    table: dict[str, dict[str, LanguageMetrics]] = {}
    langs: set[str] = set()
    for method, by_lang in grouped.items():
        table[method] = {}
        pooled: list[dict[str, Any]] = []
        for lang, rows in sorted(by_lang.items()):
            labelled = [r for r in rows if r.get("label") is not None]
            if not labelled:
                continue
            table[method][lang] = _metrics(lang, labelled)
            pooled += labelled
            langs.add(lang)
        if pooled:
            table[method][ALL] = _metrics(ALL, pooled)
    if not langs:
        raise InputError("no labelled predictions: report needs gold labels to measure quality")
    ordered_langs = sorted(langs, key=lambda lang: (lang != "en", lang))
    methods = list(table)
    report = Report(methods, ordered_langs, table, [])
    report.gates = check_gates(report, gates or [])
    return report


def _metrics(lang: str, rows: list[dict[str, Any]]) -> LanguageMetrics:
    return language_metrics(
        lang,
        [r["label"] for r in rows],
        [r.get("pred") for r in rows],
        [float(r.get("unreadable") or 0.0) for r in rows],
    )


def check_gates(report: Report, gates: list[Gate]) -> list[GateResult]:
    results = []
    for gate in gates:
        for method in report.methods:
            langs = [gate.lang] if gate.lang else report.langs
            for lang in langs:
                metrics = report.table[method].get(lang)
                if metrics is None:
                    raise InputError(
                        f"--gate '{gate.text}': no labelled predictions for "
                        f"language '{lang}' of method '{method}'"
                    )
                value = metrics.value(gate.metric)
                passed = not math.isnan(value) and _OPS[gate.op](value, gate.threshold)
                results.append(GateResult(gate, method, lang, value, passed))
    return results


# -- outputs ----------------------------------------------------------------------------------


def to_json(report: Report) -> dict[str, Any]:
    def clean(m: LanguageMetrics) -> dict[str, Any]:
        return {
            k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(m).items()
        }

    return {
        "format": "ucsj.report/1",
        "languages": report.langs,
        "methods": {
            m: {lang: clean(v) for lang, v in report.table[m].items()} for m in report.methods
        },
        "best": {lang: report.best(lang) for lang in [*report.langs, ALL]},
        "gates": [
            {
                "gate": g.gate.text,
                "method": g.method,
                "lang": g.lang,
                "value": None if math.isnan(g.value) else g.value,
                "passed": g.passed,
            }
            for g in report.gates
        ],
        "passed": not report.failed_gates,
    }


def write_json_report(report: Report, path: Path) -> None:
    with atomic_writer(path) as out:
        json.dump(to_json(report), out, ensure_ascii=False, indent=2)
        out.write("\n")


def write_junit(report: Report, path: Path) -> None:
    """A testsuite per method: a case per language (has a verdict) and per gate result."""
    lines = ['<?xml version="1.0" encoding="UTF-8"?>', "<testsuites>"]
    for method in report.methods:
        cases = []
        for lang in report.langs:
            m = report.table[method].get(lang)
            if m is None:
                continue
            cases.append(
                f"    <testcase classname={quoteattr('ucsj.' + method)} "
                f"name={quoteattr(f'{lang}: n={m.n} ba={m.ba:.4f}')}/>"
            )
        for g in (g for g in report.gates if g.method == method):
            body = "" if g.passed else f"<failure message={quoteattr(g.line())}/>"
            cases.append(
                f"    <testcase classname={quoteattr('ucsj.' + method + '.gates')} "
                f"name={quoteattr(f'{g.gate.text} [{g.lang}]')}>{body}</testcase>"
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
            text = f"{m.ba:.3f}<br><small>[{m.ba_low:.3f}, {m.ba_high:.3f}] n={m.n}</small>"
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
<h1>ucsj report</h1><p>Balanced accuracy per language (95% bootstrap interval); best per column
in bold.</p>
<table><tr><th>method</th>{head}</tr>{"".join(rows)}</table>
<h2>Gates</h2><ul>{gates}</ul>{"<h2>Analyses</h2>" + images if images else ""}</body></html>
"""
    with atomic_writer(path) as out:
        out.write(page)
