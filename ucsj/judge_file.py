"""Judge files: the fitted judge as a skops archive that loads without running code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ucsj.errors import InputError

JUDGE_FORMAT = "ucsj.judge/1"

# What a judge archive may unpack to. Judges are small (a 100,000-sample kNN judge is ~25 MB of
# arrays, its schema some kB); the bounds keep a padded or crafted archive from using
# gigabytes of memory before it is refused.
MAX_SCHEMA_BYTES = 16 << 20
MAX_UNPACKED_BYTES = 1 << 30
MAX_MEMBERS = 10_000

# Types a judge file may hold beyond skops' defaults: what the six modules are made of. Anything
# else (a function, an arbitrary class) makes loading refuse the file, so a crafted judge file
# cannot run code the way a pickle can.
TRUSTED_TYPES = (
    "sklearn.neural_network._stochastic_optimizers.AdamOptimizer",
    "sklearn.neural_network._stochastic_optimizers.SGDOptimizer",
    "sklearn.tree._tree.Tree",
    "sklearn.metrics._dist_metrics.EuclideanDistance64",
    "sklearn.neighbors._kd_tree.KDTree",
    "sklearn.neighbors._ball_tree.BallTree",
    "sklearn._loss.loss.HalfBinomialLoss",
    "sklearn._loss.link.LogitLink",
    "sklearn._loss.link.Interval",
    "sklearn.ensemble._gb.GradientBoostingClassifier",
    "sklearn.dummy.DummyClassifier",
)


def save_judge(judge: dict[str, Any], path: str | Path) -> None:
    """Write the judge as a skops file whose bytes depend only on its content."""
    import skops.io

    from ucsj.io import atomic_writer

    with atomic_writer(path, "wb") as out:
        out.write(_stable_zip(skops.io.dumps(judge)))


def _stable_zip(data: bytes) -> bytes:
    """Re-pack a skops archive so that its bytes depend only on its content.

    skops records object ids (`__id__`, and array members named after them), which differ
    between processes, and stamps the time: ids are renumbered in order of first mention and
    members dated 1980-01-01.
    """
    import io
    import re
    import zipfile

    source = zipfile.ZipFile(io.BytesIO(data))
    schema = source.read("schema.json").decode("utf-8")
    pattern = re.compile(r'("__id__": )(\d+)|"(\d+)(\.npy)"')
    order: dict[str, int] = {}
    for match in pattern.finditer(schema):
        order.setdefault(match.group(2) or match.group(3), len(order))

    def renumber(match: re.Match[str]) -> str:
        if match.group(2):
            return f"{match.group(1)}{order[match.group(2)]}"
        return f'"{order[match.group(3)]}{match.group(4)}"'

    entries = [("schema.json", pattern.sub(renumber, schema).encode("utf-8"))]
    for name in source.namelist():
        if name != "schema.json":
            stem, dot, suffix = name.partition(".")
            entries.append((f"{order.get(stem, stem)}{dot}{suffix}", source.read(name)))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as target:
        for name, content in sorted(entries):
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            target.writestr(info, content)
    return buffer.getvalue()


def load_judge(path: str | Path) -> dict[str, Any]:
    """Load a judge file, refusing any that holds types outside skops' safe set and ours."""
    import zipfile

    import skops.io
    from skops.io.exceptions import UntrustedTypesFoundException

    from ucsj.io import display_name, input_path

    name = display_name(path)
    path = input_path(path)
    if not path.is_file():
        raise InputError("judge file not found", path=name)
    if not zipfile.is_zipfile(path):
        raise InputError(
            "not a judge file written by `ucsj fit` (judge files are skops "
            "archives; pickles are refused because loading one can run code)",
            path=name,
        )
    _check_unpacked_size(path, name)
    try:
        untrusted = [t for t in skops.io.get_untrusted_types(file=path) if t not in TRUSTED_TYPES]
        if untrusted:
            raise InputError(
                f"judge file holds types ucsj does not load: {', '.join(untrusted)};"
                " refusing it (only `ucsj fit` output is accepted)",
                path=name,
            )
        judge = skops.io.load(path, trusted=list(TRUSTED_TYPES))
    except InputError:
        raise
    except UntrustedTypesFoundException as exc:
        raise InputError(
            f"judge file holds untrusted types ({exc}); refusing it", path=name
        ) from None
    except Exception as exc:  # a truncated or foreign archive raises many kinds of error
        raise InputError(
            f"not a judge file written by `ucsj fit` ({type(exc).__name__})", path=name
        ) from None
    if not isinstance(judge, dict) or judge.get("format") != JUDGE_FORMAT:
        raise InputError(f"not a {JUDGE_FORMAT} judge file", path=name)
    return judge


def _check_unpacked_size(path: Path, name: str) -> None:
    """Refuse an archive whose members would unpack past the bounds, before reading any."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError) as exc:
        raise InputError(f"not a judge file written by `ucsj fit` ({exc})", path=name) from None
    schema = sum(m.file_size for m in members if m.filename == "schema.json")
    total = sum(m.file_size for m in members)
    if len(members) > MAX_MEMBERS or schema > MAX_SCHEMA_BYTES or total > MAX_UNPACKED_BYTES:
        raise InputError(
            f"judge archive is too large to be one `ucsj fit` writes ({len(members)} members, "
            f"schema {schema:,} bytes, {total:,} bytes unpacked; at most {MAX_MEMBERS:,}, "
            f"{MAX_SCHEMA_BYTES:,} and {MAX_UNPACKED_BYTES:,}); refusing it",
            path=name,
        )
