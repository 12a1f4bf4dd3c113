"""Loss and duplication inferred from per-key counts, for sinks that keep no provenance.

A sink holding ``key -> count`` cannot say which events it counted. Comparing with the oracle's
counts per key still tells a lot: a positive delta means some events of that key were counted more
than once (duplication), a negative delta that some were not counted (loss). A key the input never
had is unexpected. Deltas of opposite sign on different keys give ``none``; a loss and a duplicate
*on the same key* cancel out and stay invisible, which is why the verdict is labelled ``inferred``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from properties.verdicts import from_anomalies


@dataclass
class Inference:
    verdict: str
    lost: list[dict] = field(default_factory=list)  # {key, delta} with delta < 0
    duplicated: list[dict] = field(default_factory=list)  # {key, delta} with delta > 0
    unexpected: list[dict] = field(default_factory=list)
    keys: dict[str, int] = field(default_factory=dict)

    def to_dict(self, sample: int | None = None) -> dict:
        cut = slice(None) if sample is None else slice(0, sample)
        return {
            "verdict": self.verdict,
            "inferred": True,
            "lost": self.lost[cut],
            "duplicated": self.duplicated[cut],
            "unexpected": self.unexpected[cut],
            "counts": {"lost": sum(-d["delta"] for d in self.lost),
                       "duplicated": sum(d["delta"] for d in self.duplicated),
                       "unexpected": len(self.unexpected)},
            "keys": self.keys,
        }


def infer_from_counts(expected: pl.DataFrame, observed: pl.DataFrame) -> Inference:
    """``expected`` and ``observed``: ``key, n``. Counts in the result are events, estimated from deltas."""
    joined = expected.select("key", pl.col("n").alias("want")).join(
        observed.select("key", pl.col("n").alias("have")), on="key", how="full", coalesce=True,
    ).with_columns(pl.col("want").fill_null(0), pl.col("have").fill_null(0))
    joined = joined.with_columns(delta=pl.col("have") - pl.col("want")).sort("key")
    strangers = joined.filter(pl.col("want") == 0)
    known = joined.filter(pl.col("want") > 0)
    lost = [{"key": k, "delta": d} for k, d in known.filter(pl.col("delta") < 0).select("key", "delta").iter_rows()]
    dup = [{"key": k, "delta": d} for k, d in known.filter(pl.col("delta") > 0).select("key", "delta").iter_rows()]
    unexpected = [{"key": k, "why": f"the input has no key {k!r}, the sink counts {h}"}
                  for k, h in strangers.select("key", "have").iter_rows()]
    verdict = from_anomalies(bool(lost), bool(dup), bool(unexpected))
    keys = {"exact": known.filter(pl.col("delta") == 0).height, "over": len(dup), "under": len(lost)}
    return Inference(verdict, lost, dup, unexpected, keys)
