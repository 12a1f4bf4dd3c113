"""The checker's judgement of a stored run, where the flow meets it: a trial run on a harness, then judged.

The runner (chaos/run/trial.py) records and decides nothing; ``properties.check.check_run`` judges a run
against the pipeline it names (``pipelines_under_test.for_run``) and writes verdict.json. Every command,
the campaign and the pytest plugin judge through ``judge``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from chaos.errors import EXIT_INCONCLUSIVE, EXIT_VIOLATION, UserError
from chaos.guarantees import GUARANTEES
from pipelines_under_test import for_run
from properties.check import check_run
from properties.verdicts import meets

if TYPE_CHECKING:
    from chaos.run.harness import Harness
    from chaos.scenario.scenario import Scenario


def judge(run_dir: Path) -> dict:
    """The verdict of the stored run in ``run_dir`` (also written to its verdict.json)."""
    return check_run(run_dir, for_run(run_dir))


def verdict_fields(v: dict) -> dict:
    """What a trial's result shows of its verdict (``trial --json``, the printed result)."""
    return {
        "verdict": v["verdict"], "meets": v["meets"], "lost": v["lost"], "duplicated": v["duplicated"],
        "source_lost": v.get("source_lost"),
        "unexpected": v["unexpected"], "anomaly_counts": v["effect"]["counts"],
        "multiplicity": v["effect"].get("multiplicity"), "inferred": v.get("inferred", False),
        "keys": v["effect"].get("keys"), "compared": v.get("compared"),
        "left_out": v.get("left_out") or [], "filled_by_database": v.get("filled_by_database") or [],
        "redelivered": (v["deliveries"] or {}).get("redelivered"),
        "consistent_cut": v.get("consistent_cut"),
        "named_checkpoints": v.get("named_checkpoints"),
        "late_writes": v.get("late_writes"),
        "note": v["effect"].get("note"),
    }


def check_expect(expect: str | None) -> None:
    """``--expect`` names a guarantee (checked before anything starts)."""
    if expect is not None and expect not in GUARANTEES:
        raise UserError(f"--expect {expect!r}: use one of {', '.join(GUARANTEES)}")


def expecting(fields: dict, expect: str | None) -> dict:
    """A judged trial's fields against ``expect`` instead of the declared guarantee (``--expect``)."""
    if expect is None:
        return fields
    return {**fields, "expected": expect, "meets": meets(fields["verdict"], expect)}


def run_trial(harness: Harness, scenario: Scenario, run_dir: Path, last: bool, expect: str | None = None) -> dict:
    """One trial on ``harness`` and the verdict of its stored run: what ``trial --json`` prints.
    ``last``: no trial follows on this harness (a shared one keeps its spares for the next); ``expect``: judge
    against this guarantee instead of the declared one."""
    result = harness.trial(scenario, run_dir, last=last)
    result["timings"] = harness.timings
    result.update(expecting(verdict_fields(judge(run_dir)), expect))
    return result


def exit_code(v: dict) -> int:
    """How a judged trial ends a command: inconclusive when its verdict is (stalled, refused), a violation
    when the guarantee is not met or a committed batch broke the consistent cut, else 0."""
    if v["meets"] is None:
        return EXIT_INCONCLUSIVE
    if v["meets"] is False or (v.get("consistent_cut") or {}).get("ok") is False:
        return EXIT_VIOLATION
    return 0


def trial_exit_code(result: dict) -> int:
    """How ``streamchaos trial`` exits for a result of ``run_trial``: inconclusive unless drained, else as
    its verdict says (``exit_code``)."""
    if result["outcome"] != "drained":
        return EXIT_INCONCLUSIVE
    return exit_code(result)
