"""Time-based chaos, the baseline every other tool offers: the same faults at uniformly random wall-clock times.

Chaos Mesh, Litmus, Pumba, Jepsen's nemesis and a cron that kills a pod fire at times, not at a micro-batch's
phase. ``campaign run --timing random`` does the same with the faults the planner chose: each phase-anchored
fault of a trial becomes the same action at a time drawn uniformly over ``[0, T]``, T being how long the same
job's trial with the same events and no fault took (measured once per row and stored in the campaign's
``timing/``), so the two timings are compared on equal terms (``benchmarks/detection.py``).
"""

from __future__ import annotations

import random
from dataclasses import replace

from chaos.scenario.faults import CHANNEL_DEFAULT_DURATION, Fault, format_duration, parse_fault

TIMINGS = ("phase", "random")


def at_random_times(faults: list[Fault | str], seconds: float, seed: int) -> list[str]:
    """``faults`` at uniform random times in ``[0, seconds]`` (seeded: the draw is recorded and replays). A clean
    stop waits for a commit and stays at its phase, as does a topic's growth (the records keyed to its new
    partitions are those after its batch); a heal at a phase (``until=``) becomes the channel's default duration."""
    draw = random.Random(seed)
    out = []
    for fault in (parse_fault(f) if isinstance(f, str) else f for f in faults):
        if fault.timed or fault.action in ("stop-driver", "add-partitions"):
            out.append(fault.spec)
            continue
        args = tuple(a for a in fault.args if not a.startswith("until="))
        if fault.until is not None:
            args += (format_duration(CHANNEL_DEFAULT_DURATION),)
        out.append(replace(fault, batch=-1, phase="planned", args=args,
                           at_s=round(draw.uniform(0.0, seconds), 2)).spec)
    return out


def timed_seed(seed: int) -> int:
    """The draw's seed for a trial of scenario seed ``seed`` (a campaign and the benchmark draw alike)."""
    from properties.planning import stable_seed

    return stable_seed(seed, "timing")
