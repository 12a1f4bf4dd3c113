"""How a pipeline is named where people read: trial ids, terminal lines and the report.

A user's job is referenced by everything a replay needs (``/src/jobs/account_totals.py:run?schema=...&sink=...``);
read in a summary line or a trial id, that is noise. It is shown by its file's stem and function
(``account_totals:run``); the full reference stays in scenario.json, summary.json and the replay command.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from chaos.errors import UserError


def short_name(name: str) -> str:
    """``/src/jobs/account_totals.py:run?sink=parquet`` -> ``account_totals:run``; ``examples.orders_upsert:run``
    -> ``orders_upsert:run``; a catalogue pipeline as it is; a configuration variant's ``[conf]`` kept."""
    head, bracket, variant = name.partition(" [")
    try:
        module, func, _ = entry_module(head.partition("?")[0])
    except UserError:  # no module:function: a catalogue name
        return name
    short = f"{module.rpartition('.')[2]}:{func}" if func else f"{module}.py"
    return short + (bracket + variant if bracket else "")


def display_names(names: Iterable[str]) -> dict[str, str]:
    """Each name's short form, unless two names share it (the same job with two sinks): those keep theirs."""
    names = list(dict.fromkeys(names))
    shared = Counter(short_name(n) for n in names)
    return {n: short_name(n) if shared[short_name(n)] == 1 else n for n in names}


SCRIPT = ""  # the function of a script's entry (``path/job.py``): none, the file runs as ``__main__``


def is_script(entry: str) -> bool:
    """``path/to/job.py`` with no ``:function``: a script, run as ``spark-submit job.py ARGS`` runs it."""
    return entry.endswith(".py")


def entry_module(entry: str) -> tuple[str, str, Path | None]:
    """``(module, function, directory to put on sys.path or None)`` of an entry point; a script's function is
    ``SCRIPT`` and its directory its own."""
    if is_script(entry):
        path = Path(entry).resolve()
        return path.stem, SCRIPT, path.parent
    target, _, func = entry.rpartition(":")
    if not target or not func:
        raise UserError(f"{entry!r}: name the job's entry point as module:function or path/to/job.py:function")
    if target.endswith(".py"):
        path = Path(target)
        if not path.is_absolute():
            parts = path.with_suffix("").parts
            if all(p.isidentifier() for p in parts):
                return ".".join(parts), func, None
            path = path.resolve()
        return path.stem, func, path.parent
    return target, func, None
