"""The checkpoint location a job names at each start, and what follows when it names a new one every time.

The harness runs the query under test on the trial's checkpoint whatever location the job names, so its offsets,
commits and state can be read and faulted. A job that names a *fresh* location at every start (a temporary
directory, a path with the run's time or a uuid in it) does not resume after a crash: its next run starts over
and reads its source from the beginning again. Run on one stable checkpoint, such a job would look correct. So
each start records the location the job named, beside the trial's checkpoint; a start that names another one than
the previous start of the same trial gets a fresh checkpoint, as the job would (the old one is kept beside it,
``checkpoint.run-K``, for the record). A job that names none but sets ``spark.sql.streaming.checkpointLocation``
gets what Spark gives it: a location per query name, or a new one per start for a query with no name. A job that
names none at all (it leaves the location to the harness) is no change.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

from chaos.store.atomic import write_json

SUFFIX = ".named.json"  # beside the checkpoint: the location each start named, in order


def named_location(options: dict[str, object], given: dict[str, object], conf_location: str | None = None,
                   query_name: str | None = None) -> str | None:
    """The ``checkpointLocation`` a writer was told (``option``/``options`` before ``start``, or ``start``'s own
    keyword: Spark reads option names case-insensitively), else the one Spark makes from
    ``spark.sql.streaming.checkpointLocation`` (``conf_location``): ``<it>/<query name>``, or ``<it>/<a random
    UUID>`` for a query with no name, a new location at every start."""
    for where in (given, options):
        for key, value in where.items():
            if key.lower() == "checkpointlocation" and value is not None:
                return str(value)
    if conf_location:
        return f"{conf_location.rstrip('/')}/{query_name or uuid.uuid4()}"
    return None


def starts(checkpoint: str) -> list[dict]:
    """Every start of the query on ``checkpoint`` so far: ``{"incarnation", "named", "fresh"}``."""
    path = Path(checkpoint + SUFFIX)
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return []


def start_on(checkpoint: str, named: str | None, incarnation: int) -> str | None:
    """Record this start's named location; when the previous start of the trial named another one, move the
    checkpoint aside so the query starts over. Returns the location the previous start named, if so."""
    before = starts(checkpoint)
    previous = next((s["named"] for s in reversed(before) if s["named"] is not None), None)
    fresh = named is not None and previous is not None and named != previous
    if fresh and Path(checkpoint).exists():
        aside = Path(f"{checkpoint}.run-{len(before)}")
        shutil.rmtree(aside, ignore_errors=True)
        Path(checkpoint).rename(aside)
    record = [*before, {"incarnation": incarnation, "named": named, "fresh": fresh}]
    write_json(Path(checkpoint + SUFFIX), record)
    return previous if fresh else None


def named_checkpoints(run_dir: Path) -> dict | None:
    """What a run's job named: the location of each start of the trial's query, the one its answer's run named
    (a start more, for free: the answer runs the job again), how many starts began over, and whether the job names
    a new location per start. None when it never named one."""
    trial = starts(str(run_dir / "checkpoint"))
    answer = starts(str(run_dir / "oracle" / "checkpoint"))
    answer_named = answer[0]["named"] if answer else None
    named = [s["named"] for s in trial]
    if not any(named) and answer_named is None:
        return None
    distinct = list(dict.fromkeys(n for n in (*named, answer_named) if n))
    return {"starts": named, "answer": answer_named, "started_over": sum(1 for s in trial if s["fresh"]),
            "per_start": len(distinct) > 1}
