"""Settings from a `.env` file in the working folder, as inspect_ai and promptfoo read them.

Only ucsj's own variables are taken, and a variable already set in the environment wins.
Values are never logged: only the names that were read.
"""

from __future__ import annotations

import os
import re
from collections.abc import MutableMapping
from pathlib import Path

from ucsj.errors import InputError

ENV_FILE = ".env"
VARIABLES = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "UCSJ_MODEL", "UCSJ_CACHE_DIR")
_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")


def parse_env(text: str, path: str = ENV_FILE) -> dict[str, str]:
    """NAME=value lines; blank lines and # comments skipped; values may be quoted."""
    values: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _LINE.match(line)
        if not match:
            # The line is not shown: it may hold a secret.
            raise InputError("expected NAME=value", path=path, line=number)
        name, value = match.groups()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        values[name] = value
    return values


def load_env_file(
    folder: Path | None = None, environ: MutableMapping[str, str] | None = None
) -> list[str]:
    """Set ucsj's variables from `folder/.env` where the environment lacks them; return the
    names set."""
    environ = os.environ if environ is None else environ
    path = (folder or Path.cwd()) / ENV_FILE
    if not path.is_file():
        return []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read it: {exc.__class__.__name__}", path=str(path)) from None
    found = parse_env(text, str(path))
    taken = [name for name in VARIABLES if name in found and name not in environ]
    for name in taken:
        environ[name] = found[name]
    return taken
