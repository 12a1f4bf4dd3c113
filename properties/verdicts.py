"""The order of strength of docs/verdicts.md's verdicts (their names: chaos/guarantees.py).

exactly-once > at-least-once, at-most-once > none > incorrect; at-least-once and at-most-once are
incomparable (their meet is none). ``stalled`` says nothing about consistency: it is inconclusive; so does
``refused``: Spark refused to run the query as configured (a configuration variant it does not support), with
its message in the trial's result; so does ``batch-dependent``: a job's output differs from Spark's one-batch
answer without any fault, so no fault can be blamed for a difference (the job's, for every trial of it).
"""

from __future__ import annotations

from chaos.guarantees import (  # noqa: F401  (re-exported: the checker's vocabulary)
    AT_LEAST_ONCE,
    AT_MOST_ONCE,
    BATCH_DEPENDENT,
    EXACTLY_ONCE,
    INCONCLUSIVE,
    INCORRECT,
    NONE,
    REFUSED,
    STALLED,
    VERDICTS,
)

# What each verdict still promises: no loss (L), no duplication (D), correct values (C).
_PROMISES = {
    EXACTLY_ONCE: frozenset("LDC"),
    AT_LEAST_ONCE: frozenset("LC"),
    AT_MOST_ONCE: frozenset("DC"),
    NONE: frozenset("C"),
    INCORRECT: frozenset(),
}


def from_anomalies(lost: bool, duplicated: bool, unexpected: bool) -> str:
    """The table of docs/verdicts.md."""
    if unexpected:
        return INCORRECT
    if lost and duplicated:
        return NONE
    if lost:
        return AT_MOST_ONCE
    if duplicated:
        return AT_LEAST_ONCE
    return EXACTLY_ONCE


def at_least_as_strong(measured: str, declared: str) -> bool:
    """Does ``measured`` keep every promise ``declared`` makes?"""
    return _PROMISES[declared] <= _PROMISES[measured]


def weakest(verdicts: list[str]) -> str | None:
    """The campaign verdict: the meet of the trials' verdicts (stalled and refused trials are left out); a job whose
    output depends on its batching is ``batch-dependent`` whatever its other trials say."""
    if BATCH_DEPENDENT in verdicts:
        return BATCH_DEPENDENT
    conclusive = [v for v in verdicts if v not in INCONCLUSIVE]
    if not conclusive:
        if not verdicts:
            return None
        return REFUSED if all(v == REFUSED for v in verdicts) else STALLED
    promises = frozenset.intersection(*(_PROMISES[v] for v in conclusive))
    return next(v for v, p in _PROMISES.items() if p == promises)


def meets(measured: str, declared: str) -> bool | None:
    """True/False, or None when the measurement is inconclusive (stalled, refused)."""
    if measured in INCONCLUSIVE:
        return None
    return at_least_as_strong(measured, declared)


def aggregate(trials: list[dict]) -> dict[str, dict]:
    """Campaign aggregation: per pipeline, the weakest verdict of its trials and ``meets`` its declared guarantee.

    ``trials``: checker reports (``verdict.json``), each with ``pipeline``, ``declared`` and ``verdict``.
    """
    out: dict[str, dict] = {}
    for t in trials:
        row = out.setdefault(t["pipeline"], {"declared": t["declared"], "verdicts": [], "trials": 0})
        row["verdicts"].append(t["verdict"])
        row["trials"] += 1
    for row in out.values():
        row["verdict"] = weakest(row["verdicts"])
        row["meets"] = meets(row["verdict"], row["declared"])
        row["stalled"] = row["verdicts"].count(STALLED)
        row["refused"] = row["verdicts"].count(REFUSED)
        del row["verdicts"]
    return out
