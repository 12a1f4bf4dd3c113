"""Per event id multiplicity -> lost / duplicated / unexpected -> verdict (DESIGN.md §3).

Inputs are polars frames so that ten million events classify in one pass of joins:

* ``expected``: one row per input event id: ``id``, ``required`` (bool), ``multiplicity`` (int,
  how often its effect must appear; 1 for a passthrough);
* ``observed``: one row per effect found in the sink: ``id`` (plus payload columns if the oracle
  checks values);
* ``unexpected``: rows the oracle could not explain by any loss or duplication of inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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


def classify(expected: pl.DataFrame, observed_ids: pl.Series, unexpected: list[dict] | None = None) -> Classification:
    """Compare expected multiplicities with the ids observed in the sink (one entry per effect)."""
    unexpected = list(unexpected or [])
    counts = pl.DataFrame({"id": observed_ids.cast(pl.Int64)}).group_by("id").agg(pl.len().alias("m"))
    joined = expected.select("id", "required", "multiplicity").join(counts, on="id", how="left").with_columns(
        pl.col("m").fill_null(0).cast(pl.Int64)
    )
    lost = joined.filter(pl.col("required") & (pl.col("m") == 0))["id"].sort().to_list()
    duplicated = joined.filter(pl.col("m") > pl.col("multiplicity"))["id"].sort().to_list()
    strangers = counts.join(expected.select("id"), on="id", how="anti")["id"].sort().to_list()
    unexpected += [{"id": i, "why": "no input event has this id"} for i in strangers]
    verdict = from_anomalies(bool(lost), bool(duplicated), bool(unexpected))
    multiplicity = {
        "0": joined.filter(pl.col("m") == 0).height,
        "1": joined.filter(pl.col("m") == 1).height,
        ">1": joined.filter(pl.col("m") > 1).height,
    }
    return Classification(verdict, lost, duplicated, unexpected, multiplicity)
