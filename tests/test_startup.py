"""The command line starts without the heavy libraries: they are imported where they are used."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("scipy", "sklearn", "matplotlib")

PROBE = """
import json, sys
from ucsj.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(json.loads(HEAVY)))
print(json.dumps(heavy))
"""


def loaded_after(*argv: str) -> list[str]:
    """The heavy top-level packages in sys.modules after running `ucsj ARGV` in a fresh Python."""
    proc = subprocess.run(
        [sys.executable, "-c", PROBE.replace("HEAVY", repr(json.dumps(HEAVY))), *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "argv",
    [
        (),
        ("--help",),
        ("--version",),
        ("score", "--help"),
        ("judge", "--help"),
        ("fit", "--help"),
        ("analyze", "importance", "--help"),
        ("report", "--help"),
    ],
)
def test_the_cli_starts_without_scipy_sklearn_or_matplotlib(argv):
    assert loaded_after(*argv) == []


def test_the_probe_sees_heavy_imports_when_a_command_uses_them(tmp_path):
    """The check above would pass vacuously if the probe could not see an import."""
    assert "sklearn" in loaded_after("fit", "--train", str(tmp_path / "missing.jsonl"))


def test_the_module_names_the_cli_offers_are_the_transfer_modules():
    from ucsj.transfer import MODULES, SCORE_MODULES
    from ucsj.transfer_options import MODULE_NAMES

    assert tuple(MODULES) == tuple(SCORE_MODULES) == MODULE_NAMES


def test_lazy_method_choice_lists_the_methods_and_rejects_others(capsys):
    from ucsj.cli import main
    from ucsj.methods import METHODS

    with pytest.raises(SystemExit) as exit_info:
        main(["judge", "x.jsonl", "--method", "nope", "--task", "rag-faithfulness"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "'nope' is not one of" in err
    assert all(f"'{name}'" in err for name in METHODS)
