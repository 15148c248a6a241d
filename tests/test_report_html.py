"""`report --html`: every terminal column, the gates, provenance, and captions under the plots."""

from __future__ import annotations

import hashlib
import html
import json
import re

import pytest
from conftest import ucsj

from ucsj import __version__
from ucsj.report import DETAIL_COLUMNS
from ucsj.report_html import png_description


def write_rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def binary_rows(method, lang, preds, labels, **extra):
    return [
        {"id": f"{lang}-{i}", "lang": lang, "label": y, "method": method, "pred": p,
         "prob": None, "unreadable": 0.0, **extra}
        for i, (p, y) in enumerate(zip(preds, labels, strict=True))
    ]  # fmt: skip


def cells(page: str, method: str) -> list[str]:
    """The cells of METHOD's row in the headline table, tags stripped."""
    row = re.search(rf"<tr><th class=\"name\">{method}</th>(.*?)</tr>", page).group(1)
    return [re.sub(r"<[^>]+>", " ", c).split() for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]


@pytest.fixture
def binary_files(tmp_path):
    labels = [1, 0, 1, 0, 1, 0]
    provenance = {"model": "m-2024-01-01", "criteria": "sha256:abc123"}
    good = write_rows(
        tmp_path / "fr.ucs.jsonl",
        binary_rows("ucs-mlp", "fr", [1, 0, 1, 0, 1, 1], labels, **provenance),
    )
    silent = write_rows(tmp_path / "fr.cot.jsonl", binary_rows("cot", "fr", [None] * 6, labels))
    return good, silent


def test_html_has_every_column_gates_provenance_and_no_verdict(binary_files, tmp_path):
    good, silent = binary_files
    page_path = tmp_path / "r.html"
    code = ucsj("report", str(good), str(silent), "--gate", "ba>=0.7", "--html", str(page_path))
    assert code == 1, "cot's gate fails"
    page = page_path.read_text()
    # provenance: version, date, scoring model, criteria, inputs with digests, command line
    assert f"<dt>ucsj</dt><dd>{__version__}</dd>" in page
    assert re.search(r"<dt>created</dt><dd>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</dd>", page)
    assert "<code>m-2024-01-01</code> <small>(ucs-mlp)</small>" in page
    assert "<code>sha256:abc123</code> <small>(ucs-mlp)</small>" in page
    for path in (good, silent):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        assert f"<code>{path}</code> <small>6 rows, sha256 {digest}</small>" in page
    command = f"ucsj report {good} {silent} --gate 'ba>=0.7' --html {page_path}"
    assert f"<code>{html.escape(command)}</code>" in page
    # every column the terminal shows
    for _, heading in DETAIL_COLUMNS["binary"]:
        assert f"<th>{heading}</th>" in page
    assert "<th>ba [95% CI]</th>" in page
    # ucs-mlp: 5 of 6 right -> BA 0.833; TPR 1.000, TNR 0.667, pass rate 0.667
    assert cells(page, "ucs-mlp")[0][0] == "0.833"
    assert "<td>1.000</td><td>0.667</td><td>0.667</td>" in page
    # a method without any verdict is shown as such, never as a 0.000 score
    assert "<th>fr</th><th>avg</th><th>all</th>" in page
    assert cells(page, "cot") == [["no", "verdict", "0", "of", "6"]] * 3
    assert "no verdict for any sample" in page
    # gates with their results
    assert '<td class="name"><code>ba&gt;=0.7</code></td><td class="name">ucs-mlp</td>' in page
    assert page.count(">passed</td>") == 1 and page.count(">FAILED</td>") == 1
    assert "1 of 2 gate checks failed" in page
    assert "http" not in page.split("<body>")[1], "the page opens offline"


def test_html_pairwise_and_pointwise_columns(tmp_path):
    pairs = [
        {"id": f"p{i}", "lang": "fr", "preference": "a", "method": "zero-shot",
         "pred": "a", "pred_swapped": "b" if i % 2 else "a", "unreadable": 0.0}
        for i in range(4)
    ]  # fmt: skip
    path = write_rows(tmp_path / "pairs.jsonl", pairs)
    assert ucsj("report", str(path), "--html", str(tmp_path / "p.html")) == 0
    page = (tmp_path / "p.html").read_text()
    for _, heading in DETAIL_COLUMNS["pairwise"]:
        assert f"<th>{heading}</th>" in page
    scores = [
        {"id": f"s{i}", "lang": "de", "pair": "en-de", "score": i % 7 + 1, "method": "ucs-rf",
         "pred": float(i % 7 + 1) if i != 3 else None, "unreadable": 0.0}
        for i in range(8)
    ]  # fmt: skip
    path = write_rows(tmp_path / "scores.jsonl", scores)
    assert ucsj("report", str(path), "--html", str(tmp_path / "s.html")) == 0
    page = (tmp_path / "s.html").read_text()
    assert "<th>no score</th>" in page and "<td>0.125</td>" in page
    assert "Kendall&#x27;s tau per language pair" in page


def test_figures_carry_their_captions_into_the_page(binary_files, tmp_path):
    from ucsj.plots import plot_bars, plot_decomposition

    bars, decomposition = tmp_path / "bars.png", tmp_path / "decomposition.png"
    plot_bars({"a": 0.7, "b": 0.6}, bars, "T", "balanced accuracy", "Two things compared")
    results = {
        "per-concept": {"calls_per_sample": 3, "prompt_tokens_per_sample": 300,
                        "completion_tokens_per_sample": 30, "llm_seconds_per_sample": None,
                        "ba_avg": 0.7},
        "joint": {"calls_per_sample": 1, "prompt_tokens_per_sample": 120,
                  "completion_tokens_per_sample": 40, "llm_seconds_per_sample": None,
                  "ba_avg": 0.6},
    }  # fmt: skip
    plot_decomposition(results, decomposition)
    caption = png_description(decomposition.read_bytes())
    assert caption.startswith("Decomposition: for each variant, the cost per sample")
    assert "no server seconds" in caption
    good, _ = binary_files
    page_path = tmp_path / "r.html"
    args = ["--figure", str(bars), "--figure", str(decomposition)]
    assert ucsj("report", str(good), "--html", str(page_path), *args) == 0
    page = page_path.read_text()
    assert page.count("data:image/png;base64,") == 2
    assert "<figcaption>Two things compared; dotted line: chance (0.5). " in page
    assert f"<figcaption>{html.escape(caption)} <small>(decomposition.png)</small>" in page


def test_a_figure_that_is_not_a_png_is_refused(binary_files, tmp_path, capsys):
    good, _ = binary_files
    figure = tmp_path / "x.jsonl"
    figure.write_text('{"not": "a picture"}\n')
    capsys.readouterr()
    page = tmp_path / "r.html"
    assert ucsj("report", str(good), "--html", str(page), "--figure", str(figure)) == 2
    assert f"{figure}: --figure must be a PNG" in capsys.readouterr().err
    assert not page.exists()


def test_png_description_reads_only_the_description_chunk():
    assert png_description(b"\x89PNG\r\n\x1a\n") is None


def test_undefined_metrics_show_as_na_with_their_reason(tmp_path):
    rows = binary_rows("ucs-mlp", "fr", [1, 0, 1, 0], [1, 0, 1, 0])
    rows += binary_rows("ucs-mlp", "de", [1, 1, 0, 1], [1, 1, 1, 1])  # one class: BA undefined
    path = write_rows(tmp_path / "p.jsonl", rows)
    page_path = tmp_path / "r.html"
    assert ucsj("report", str(path), "--gate", "ba[de]>=0.5", "--html", str(page_path)) == 1
    page = page_path.read_text()
    assert "<th>de</th><th>fr</th><th>avg</th><th>all</th>" in page
    assert cells(page, "ucs-mlp")[0][:2] == ["n/a", "[n/a,"]
    assert "<h2>Undefined</h2>" in page and "ucs-mlp [de]: ba n/a: " in page
    assert re.search(r"<td>n/a <small>\([^<]+\)</small></td><td class=\"fail\">FAILED</td>", page)
