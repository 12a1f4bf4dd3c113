"""Shards of a campaign's plan: the I-th of N disjoint shares, each run on a machine of its own by a scheduler
people already run (a Slurm array, a CI matrix, a Kubernetes Indexed Job), then merged (chaos/campaign/merge.py).

Every shard makes the very plan the unsharded command makes (the plan depends on the options and the seed,
never on the machine: chaos.campaign.stored.Campaign.create with ``portable``), keeps it whole in its
campaign.json with its share, and runs only the share. A plan's hash (``plan_hash``) is what shards and
merge compare. Shares balance by expected cost: trials with more events and more faults weigh more, and
each goes to the lightest share so far, heaviest first (longest-processing-time first, ties by id), so
the shares are the same on every machine.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from importlib import metadata

from chaos.errors import UserError

# A fault costs about as much as a tenth of a standard trial's stream (a restart, a takeover, a replayed batch).
FAULT_COST_EVENTS = 200
SHARD_HELP = ("I/N (I from 1): run the I-th of N shares of the plan; auto: from the scheduler's environment "
              "(Slurm arrays; Kubernetes Indexed Jobs with --shards N)")


def harness_version() -> str:
    try:
        return metadata.version("streamchaos")
    except metadata.PackageNotFoundError:
        return "unknown"


def plan_hash(data: Mapping) -> str:
    """The hash of a campaign's plan: its spec, every planned trial's scenario, its canonical windows and the
    harness's version. Two campaign directories with the same hash ran (shares of) the same plan."""
    body = {"spec": data["spec"], "plan": data["plan"], "windows": data.get("windows", {}),
            "skipped": data.get("skipped", []), "harness": data.get("harness", harness_version())}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:16]


def cost(entry: Mapping) -> int:
    """A plan entry's expected cost, in events: its stream plus a share for each fault."""
    scenario = entry["scenario"]
    return int(scenario.get("events", 0)) + FAULT_COST_EVENTS * len(scenario.get("faults", []))


def shares(plan: list[Mapping], count: int) -> list[list[str]]:
    """``count`` disjoint shares of the plan's trial ids, balanced by cost; each share in plan order."""
    loads = [0] * count
    members: list[list[str]] = [[] for _ in range(count)]
    order = {entry["id"]: k for k, entry in enumerate(plan)}
    for entry in sorted(plan, key=lambda e: (-cost(e), e["id"])):
        lightest = min(range(count), key=lambda k: (loads[k], k))
        loads[lightest] += cost(entry)
        members[lightest].append(entry["id"])
    return [sorted(ids, key=order.__getitem__) for ids in members]


def parse_shard(text: str | None, count: int | None = None,
                environ: Mapping[str, str] | None = None) -> tuple[int, int] | None:
    """``I/N`` (I from 1) or ``auto`` -> (I, N), I from 1. ``auto`` converts the scheduler's own bases: a Slurm
    array task (``SLURM_ARRAY_TASK_ID`` relative to ``SLURM_ARRAY_TASK_MIN``, ``SLURM_ARRAY_TASK_COUNT``), a
    Kubernetes Indexed Job's pod (``JOB_COMPLETION_INDEX`` from 0, N from ``--shards``)."""
    if text is None:
        if count is not None:
            raise UserError("--shards N goes with --shard auto (a Kubernetes Indexed Job's completions)")
        return None
    env = os.environ if environ is None else environ
    if text == "auto":
        if "SLURM_ARRAY_TASK_ID" in env:
            try:
                task, low = int(env["SLURM_ARRAY_TASK_ID"]), int(env.get("SLURM_ARRAY_TASK_MIN", "0"))
                total = count or int(env["SLURM_ARRAY_TASK_COUNT"])
            except (KeyError, ValueError):
                raise UserError("--shard auto: this Slurm job's SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_MIN and "
                                "SLURM_ARRAY_TASK_COUNT are not all integers; pass --shard I/N") from None
            index = task - low + 1
        elif "JOB_COMPLETION_INDEX" in env:
            if count is None:
                raise UserError("--shard auto in a Kubernetes Indexed Job needs --shards N (the Job's "
                                "completions): the pod sees only its own index")
            try:
                index, total = int(env["JOB_COMPLETION_INDEX"]) + 1, count
            except ValueError:
                raise UserError(f"--shard auto: JOB_COMPLETION_INDEX={env['JOB_COMPLETION_INDEX']!r} is not an "
                                "integer; pass --shard I/N") from None
        else:
            raise UserError("--shard auto found no scheduler here (neither SLURM_ARRAY_TASK_ID nor "
                            "JOB_COMPLETION_INDEX is set): pass --shard I/N, as a GitHub Actions matrix does")
    else:
        match = re.fullmatch(r"(\d+)/(\d+)", text.strip())
        if not match:
            raise UserError(f"--shard {text!r}: use I/N with I from 1, e.g. --shard 2/4, or --shard auto")
        if count is not None:
            raise UserError("--shards N goes with --shard auto; with --shard I/N the N is given")
        index, total = int(match.group(1)), int(match.group(2))
    if total < 1 or not 1 <= index <= total:
        raise UserError(f"--shard {index}/{total}: the index runs from 1 to the number of shards")
    return index, total


def plan_differences(a: Mapping, b: Mapping) -> list[str]:
    """What makes two campaign files' plans differ, for a one-line refusal: spec fields, the harness's version,
    else the plan itself."""
    out = [f"spec.{k} ({a['spec'].get(k)!r} vs {b['spec'].get(k)!r})"
           for k in sorted(set(a["spec"]) | set(b["spec"])) if a["spec"].get(k) != b["spec"].get(k)]
    if a.get("harness") != b.get("harness"):
        out.append(f"harness version ({a.get('harness')} vs {b.get('harness')})")
    if not out and plan_hash(a) != plan_hash(b):
        out.append("the planned trials")
    return out
