"""Reading the user's JSON files, with the one-line errors every input file gets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rebalancer.errors import InputError


def read_json(path: Path, what: str) -> Any:
    """Decoded JSON of `path`, or an InputError naming the file, what it should hold, and why."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise InputError(f"{path}: cannot read {what} ({error.strerror})") from None
    except json.JSONDecodeError as error:
        raise InputError(f"{path}: not valid JSON (line {error.lineno}: {error.msg})") from None
