"""Per event id multiplicity -> lost / duplicated / unexpected -> verdict (docs/verdicts.md).

Inputs are polars frames; the counting is numpy (a bincount over id positions), so ten million
events classify in well under a second:

* ``expected``: one row per input event id: ``id``, ``required`` (bool), ``multiplicity`` (int,
  how often its effect must appear; 1 for a passthrough, the number of its pairs for a join): a
  required id seen fewer times is lost, any id seen more often is duplicated;
* ``observed``: one row per effect found in the sink: ``id`` (plus payload columns if the oracle
  checks values);
* ``unexpected``: rows the oracle could not explain by any loss or duplication of inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from properties.verdicts import from_anomalies


@dataclass
class Classification:
    verdict: str
    lost: list[int] = field(default_factory=list)
    duplicated: list[int] = field(default_factory=list)
    unexpected: list[dict] = field(default_factory=list)
    multiplicity: dict[str, int] = field(default_factory=dict)  # {"0": n, "1": n, ">1": n}

    def to_dict(self, sample: int | None = None) -> dict:
        cut = slice(None) if sample is None else slice(0, sample)
        return {
            "verdict": self.verdict,
            "lost": self.lost[cut],
            "duplicated": self.duplicated[cut],
            "unexpected": self.unexpected[cut],
            "counts": {"lost": len(self.lost), "duplicated": len(self.duplicated),
                       "unexpected": len(self.unexpected)},
            "multiplicity": self.multiplicity,
        }


def multiplicities(ids: np.ndarray, observed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``m`` per expected id (ids sorted ascending, unique) and the observed ids no input has.

    Event ids are usually dense (0..n-1): then an id's position is the id minus the first, and the
    multiplicity is one ``bincount`` — linear, no hashing. Otherwise binary search finds positions.
    """
    n = ids.size
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.unique(observed)
    if int(ids[-1]) - int(ids[0]) == n - 1:
        pos = observed - ids[0]
        valid = (pos >= 0) & (pos < n)
    else:
        pos = np.searchsorted(ids, observed)
        valid = pos < n
        valid[valid] = ids[pos[valid]] == observed[valid]
    m = np.bincount(pos[valid], minlength=n).astype(np.int64)
    return m, np.unique(observed[~valid])


def classify(expected: pl.DataFrame, observed_ids: pl.Series, unexpected: list[dict] | None = None) -> Classification:
    """Compare expected multiplicities with the ids observed in the sink (one entry per effect)."""
    unexpected = list(unexpected or [])
    frame = expected.select("id", "required", "multiplicity")
    if not frame["id"].is_sorted():
        frame = frame.sort("id")
    ids = frame["id"].to_numpy().astype(np.int64, copy=False)
    required = frame["required"].to_numpy()
    wanted = frame["multiplicity"].to_numpy()
    m, strangers = multiplicities(ids, observed_ids.cast(pl.Int64).drop_nulls().to_numpy())
    lost = ids[required & (m < wanted)].tolist()  # an id owed k effects (a join's pairs) lost one if it has fewer
    duplicated = ids[m > wanted].tolist()
    unexpected += [{"id": int(i), "why": "no input event has this id"} for i in strangers.tolist()]
    verdict = from_anomalies(bool(lost), bool(duplicated), bool(unexpected))
    multiplicity = {"0": int((m == 0).sum()), "1": int((m == 1).sum()), ">1": int((m > 1).sum())}
    return Classification(verdict, lost, duplicated, unexpected, multiplicity)
