"""The report as one self-contained HTML page: what the terminal shows, and where it came from.

Provenance first (ucsj version, date, scoring model, criteria, input files with their SHA-256,
the command line), then the headline table of methods x groups, one table per method with
every column of the terminal's, the gates with their results, and the analyses' plots with
captions. It opens with no network: the plots are inlined.
"""

from __future__ import annotations

import base64
import html
import math
import struct
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ucsj import __version__
from ucsj.errors import InputError
from ucsj.io import atomic_writer, file_sha256, read_json_lines
from ucsj.report import (
    ALL,
    AVG,
    DETAIL_COLUMNS,
    EXTRA_COLUMNS,
    HEADLINE_TITLE,
    GateResult,
    Report,
    fmt,
    headline,
    no_verdict_at_all,
    undefined_notes,
)


@dataclass(frozen=True)
class InputFile:
    path: str
    sha256: str
    rows: int | None  # None: not a predictions file


@dataclass
class Provenance:
    """Where a report came from; `models` and `criteria` map each to the methods using it."""

    version: str
    created: str  # ISO 8601, UTC
    command: str
    inputs: list[InputFile]
    models: dict[str, list[str]] = field(default_factory=dict)
    criteria: dict[str, list[str]] = field(default_factory=dict)


def collect_provenance(
    paths: list[Path],
    command: str,
    now: datetime | None = None,
    others: list[Path] | None = None,
) -> Provenance:
    """Digest the prediction files (and `others`, e.g. a judge and scores) and gather the
    scoring models and criteria the predictions name."""
    inputs = []
    models: dict[str, list[str]] = {}
    criteria: dict[str, list[str]] = {}
    for path in paths:
        rows = 0
        for _, row in read_json_lines(path):
            rows += 1
            method = str(row.get("method"))
            for value, seen in ((row.get("model"), models), (row.get("criteria"), criteria)):
                if isinstance(value, str) and method not in seen.setdefault(value, []):
                    seen[value].append(method)
        inputs.append(InputFile(str(path), file_sha256(path), rows))
    inputs += [InputFile(str(path), file_sha256(path), None) for path in others or []]
    created = (now or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M:%S UTC")
    return Provenance(__version__, created, command, inputs, models, criteria)


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def check_figures(figures: list[Path]) -> None:
    """Each --figure is a PNG: anything else would be inlined as a broken data:image/png."""
    for path in figures:
        with path.open("rb") as stream:
            start = stream.read(len(PNG_SIGNATURE))
        if start != PNG_SIGNATURE:
            raise InputError(
                "--figure must be a PNG (e.g. from `ucsj analyze ... --plot`); this file does "
                "not start with the PNG signature",
                path=str(path),
            )


def png_description(data: bytes) -> str | None:
    """The `Description` text chunk of a PNG (ucsj's plots carry their caption there)."""
    position = 8
    while position + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[position : position + 8])
        body = data[position + 8 : position + 8 + length]
        if kind in (b"tEXt", b"zTXt", b"iTXt"):
            key, _, value = body.partition(b"\0")
            if key == b"Description":
                return _chunk_text(kind, value)
        if kind == b"IEND":
            break
        position += 12 + length
    return None


def _chunk_text(kind: bytes, value: bytes) -> str | None:
    try:
        if kind == b"tEXt":
            return value.decode("latin-1")
        if kind == b"zTXt":
            return zlib.decompress(value[1:]).decode("latin-1")
        compressed, _method, rest = value[0], value[1], value[2:]
        text = rest.split(b"\0", 2)[2]  # after the language tag and translated keyword
        return (zlib.decompress(text) if compressed else text).decode("utf-8")
    except (zlib.error, UnicodeDecodeError, IndexError):
        return None


# -- the page ------------------------------------------------------------------------------------

STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d1d1f;
background:#fafafa}
main{max-width:1200px;margin:0 auto;padding:1.5em 2em 3em}
h1{margin:.2em 0 .4em}h2{margin:1.6em 0 .4em;border-bottom:1px solid #ddd;padding-bottom:.2em}
h3{margin:1.2em 0 .3em}p.note{color:#555;margin:.3em 0 .8em;max-width:60em}
table{border-collapse:collapse;background:#fff;margin:.3em 0}
td,th{border:1px solid #d0d0d0;padding:.35em .7em;text-align:right;
font-variant-numeric:tabular-nums}
th{background:#f0f0f0}td.name,th.name{text-align:left}
td.best{font-weight:bold;background:#e6f4ea}td.none{color:#8a5a00;background:#fff4e0}
small{color:#666}
dl.prov{display:grid;grid-template-columns:max-content 1fr;gap:.25em 1em;margin:.5em 0;
background:#fff;border:1px solid #d0d0d0;padding:.7em 1em}
dl.prov dt{font-weight:600}dl.prov dd{margin:0;overflow-wrap:anywhere}
code{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.9em}
.pass{color:#1e7e34;font-weight:600}.fail{color:#b00020;font-weight:600}
figure{margin:1em 0;background:#fff;border:1px solid #d0d0d0;padding:.8em;display:inline-block;
max-width:calc(100% - 1.6em)}
figure img{max-width:100%;height:auto;display:block}figcaption{color:#333;margin-top:.5em;
max-width:70em}
"""

GROUPS_NOTE = {
    "binary": "per language",
    "pointwise": "per language pair",
    "pairwise": "per language",
}


def _esc(value: object) -> str:
    return html.escape(str(value))


def _provenance(prov: Provenance) -> str:
    def methods(mapping: dict[str, list[str]], none: str) -> str:
        if not mapping:
            return _esc(none)
        return "<br>".join(
            f"<code>{_esc(value)}</code> <small>({_esc(', '.join(users))})</small>"
            for value, users in mapping.items()
        )

    inputs = "<br>".join(
        f"<code>{_esc(f.path)}</code> <small>"
        f"{'' if f.rows is None else f'{f.rows} rows, '}sha256 {_esc(f.sha256)}</small>"
        for f in prov.inputs
    )
    items = [
        ("ucsj", _esc(prov.version)),
        ("created", _esc(prov.created)),
        ("scoring model", methods(prov.models, "not recorded in the predictions")),
        ("criteria", methods(prov.criteria, "not recorded in the predictions")),
        ("inputs", inputs),
        ("command", f"<code>{_esc(prov.command)}</code>"),
    ]
    return '<dl class="prov">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in items) + "</dl>"


def _headline_table(report: Report) -> str:
    groups = report.columns
    head = "".join(f"<th>{_esc(g)}</th>" for g in groups)
    rows = []
    for method in report.methods:
        cells = []
        for group in groups:
            m = report.table[method].get(group)
            if m is None:
                cells.append("<td>–</td>")
            elif no_verdict_at_all(m):
                cells.append(f'<td class="none">no verdict<br><small>0 of {m.n}</small></td>')
            else:
                best = len(report.methods) > 1 and method in report.best(group)
                value, interval = headline(report, m).split(" ", 1)
                cells.append(
                    f'<td class="{"best" if best else "plain"}">{value}<br>'
                    f"<small>{interval} n={m.n}</small></td>"
                )
        rows.append(f'<tr><th class="name">{_esc(method)}</th>{"".join(cells)}</tr>')
    return f'<table><tr><th class="name">method</th>{head}</tr>{"".join(rows)}</table>'


def _method_table(report: Report, method: str) -> str:
    details = DETAIL_COLUMNS[report.kind]
    extras = report.extras.get(method, {})  # baselines' own columns (cut off, chosen first)
    extra_names = list(next(iter(extras.values()), {}))
    first = "lang" if report.kind == "binary" else "group"
    head = "".join(
        f"<th>{_esc(h)}</th>"
        for h in (
            f"{report.headline} [95% CI]",
            *(name for _, name in details),
            *(EXTRA_COLUMNS[name][0] for name in extra_names),
        )
    )
    rows = []
    for group in [*report.langs, *report.breakdowns, AVG, ALL]:
        m = report.table[method].get(group)
        if m is None:
            continue
        if no_verdict_at_all(m):
            # The other columns would show the verdicts counted as wrong, not a quality.
            others = sum(metric != "error_rate" for metric, _ in details)
            cells = '<td class="none">no verdict for any sample</td>'
            if others:
                cells += (
                    f'<td class="none" colspan="{others}"><small>counted as wrong: '
                    f"{report.headline} {fmt(m.value(report.headline))}</small></td>"
                )
            cells += f'<td class="none">{fmt(m.value("error_rate"))}</td>'
        else:
            cells = f"<td>{_esc(headline(report, m))}</td>" + "".join(
                f"<td>{fmt(m.value(metric))}</td>" for metric, _ in details
            )
        cells += "".join(
            f'<td class="extra">{fmt(extras.get(group, {}).get(name, math.nan))}</td>'
            for name in extra_names
        )
        rows.append(f'<tr><td class="name">{_esc(group)}</td><td>{m.n}</td>{cells}</tr>')
    return (
        f'<h3>{_esc(method)}</h3><table><tr><th class="name">{first}</th><th>n</th>{head}</tr>'
        f"{''.join(rows)}</table>"
    )


def _gates(report: Report) -> str:
    if not report.gates:
        return '<p class="note">No gates were given (<code>--gate</code>).</p>'
    rows = "".join(
        f'<tr><td class="name"><code>{_esc(g.gate.text)}</code></td>'
        f'<td class="name">{_esc(g.method)}</td><td class="name">{_esc(g.group)}</td>'
        f"<td>{_gate_value(g)}</td>"
        f'<td class="{"pass" if g.passed else "fail"}">{"passed" if g.passed else "FAILED"}</td>'
        "</tr>"
        for g in report.gates
    )
    failed = len(report.failed_gates)
    summary = (
        f'<p class="{"fail" if failed else "pass"}">{failed} of {len(report.gates)} gate checks '
        f"failed</p>"
        if failed
        else f'<p class="pass">all {len(report.gates)} gate checks passed</p>'
    )
    return (
        f'{summary}<table><tr><th class="name">gate</th><th class="name">method</th>'
        f'<th class="name">group</th><th>value</th><th>result</th></tr>{rows}</table>'
    )


def _gate_value(gate: GateResult) -> str:
    if gate.undefined:
        return f"{fmt(math.nan)} <small>({_esc(gate.undefined)})</small>"
    return fmt(gate.value)


def _undefined(report: Report) -> str:
    notes = undefined_notes(report)
    if not notes:
        return ""
    items = "".join(f"<li>{_esc(n)}</li>" for n in notes)
    return f'<h2>Undefined</h2><p class="note">Metrics with no value, and why.</p><ul>{items}</ul>'


def _maybe(value: float | None) -> str:
    return "–" if value is None else fmt(value)


def _shift(report: Report) -> str:
    """The answers' shift from the judge's English reference, when the report has it."""
    shift = report.shift
    if shift is None:
        return ""
    rows = "".join(
        f'<tr><td class="name">{_esc(lang)}</td><td>{s.n}</td>'
        f'<td class="{"fail" if s.warn else "plain"}">{s.shift:.3f}</td><td>{s.chance:.3f}</td>'
        f"<td>{_maybe(s.unexplained)}</td><td>{_maybe(s.predicted_pass_rate)}</td>"
        '<td class="name">'
        + "<br>".join(_esc(f"{c.id} {c.text} {c.direction}") for c in s.top)
        + "</td></tr>"
        for lang, s in shift.languages.items()
    )
    return (
        f"<h2>Answer shift from the {_esc(shift.reference)} reference</h2>"
        '<p class="note">Mean W1 distance of each criterion\'s P(yes) from the reference '
        "(0 = answered as in English); genuinely better or worse outputs move it too, "
        "'unexplained' is what a different pass rate cannot produce (reference pass rate "
        f"{_maybe(shift.reference_pass_rate)}).</p>"
        '<table><tr><th class="name">lang</th><th>n</th><th>shift</th><th>chance</th>'
        '<th>unexplained</th><th>pass rate</th><th class="name">most moved</th></tr>'
        f"{rows}</table>"
    )


def _figures(figures: list[Path]) -> str:
    parts = []
    for path in figures:
        data = path.read_bytes()
        caption = png_description(data) or "A plot given with --figure."
        parts.append(
            f'<figure><img alt="{_esc(caption)}" src="data:image/png;base64,'
            f'{base64.b64encode(data).decode()}"><figcaption>{_esc(caption)} '
            f"<small>({_esc(path.name)})</small></figcaption></figure>"
        )
    return "<h2>Analyses</h2>" + "".join(parts) if parts else ""


def render_html(report: Report, provenance: Provenance, figures: list[Path] | None = None) -> str:
    title = HEADLINE_TITLE[report.kind]
    undefined = (
        f' "{fmt(math.nan)}": undefined, with the reason below.' if undefined_notes(report) else ""
    )
    details = ", ".join(name for _, name in DETAIL_COLUMNS[report.kind])
    methods = "".join(_method_table(report, m) for m in report.methods)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>ucsj report</title><style>{STYLE}</style></head><body><main>
<h1>ucsj report</h1>
{_provenance(provenance)}
<h2>{_esc(title)} {GROUPS_NOTE[report.kind]}</h2>
<p class="note">{_esc(title)} with its 95% bootstrap interval and the number of samples with a
gold value; avg: the unweighted mean over languages, all: every sample pooled{
        "; every method tied for the best of a column in bold" if len(report.methods) > 1 else ""
    }. A verdict that could not be read counts as wrong.{undefined}</p>
{_headline_table(report)}
<h2>Per method</h2>
<p class="note">Every column of the terminal's report: {_esc(details)}.</p>
{methods}
{_undefined(report)}
{_shift(report)}
<h2>Gates</h2>
{_gates(report)}
{_figures(figures or [])}
</main></body></html>
"""


def write_html(
    report: Report, path: Path, provenance: Provenance, figures: list[Path] | None = None
) -> None:
    with atomic_writer(path) as out:
        out.write(render_html(report, provenance, figures))
