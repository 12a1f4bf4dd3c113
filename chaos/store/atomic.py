"""Atomic file writes: a reader (a resumed campaign, an open report, ``check``) never sees half a file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path


def _into_place(path: Path, write: Callable[[Path], object]) -> Path:
    """``write`` a file beside ``path``, then rename it into place (creating the parent directory)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    write(tmp)
    tmp.replace(path)
    return path


def write_text(path: Path, text: str) -> Path:
    """Write ``text`` beside ``path`` and rename it into place (creating the parent directory)."""
    return _into_place(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_json(path: Path, data) -> Path:
    return write_text(path, json.dumps(data, indent=2, default=str))


def write_parquet(frame, path: Path) -> Path:
    """A polars frame into ``path`` the same way: beside it first, then renamed into place."""
    return _into_place(path, frame.write_parquet)
