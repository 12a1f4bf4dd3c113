"""``streamchaos campaign merge OUT DIR...``: shards of one plan (chaos/campaign/shards.py) made into one campaign
directory, as if one machine had run the whole plan: its campaign.json (the plan, no share), every
finished trial, the shrinks, the summary and the report. ``analyze``, ``report`` and ``replay`` work on it.

Shards of different plans are refused in one line naming what differs. A planned trial no shard finished
is listed (``missing`` in the summary), and the claims cover what ran, as on one machine. When several
shards shrank the same row, the smallest counterexample is kept and the others are listed beside it,
their shrink trials kept under ids of their own (``<row>-shrink-s<I>-NN``). Merging the same shard twice
changes nothing: a trial or shrink found twice with the same verdict is taken once.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from chaos.campaign.shards import plan_differences, plan_hash
from chaos.campaign.stored import Campaign
from chaos.errors import UserError
from chaos.store.atomic import write_json


def copy_tree(source: Path, target: Path) -> None:
    """A trial directory, hard-linked where the file system allows (stored trials are never written again)."""
    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, target, copy_function=link, symlinks=True)


def _verdict(campaign: Campaign, trial_id: str) -> str | None:
    v = campaign.verdict_of(trial_id)
    return v["verdict"] if v else None


def merge(out: Path, dirs: list[Path]) -> tuple[Campaign, dict]:
    """Merge the campaign directories ``dirs`` into ``out``; returns the merged campaign and what merge saw."""
    if not dirs:
        raise UserError("give the shards' campaign directories: streamchaos campaign merge OUT DIR...")
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise UserError(f"{out} exists and is not empty: merge into a new directory")
    shards = [Campaign.load(d) for d in dirs]
    first = shards[0]
    for other in shards[1:]:
        if plan_hash(other.data) != plan_hash(first.data):
            differs = "; ".join(plan_differences(first.data, other.data))
            raise UserError(f"{other.root} holds another plan than {first.root}: {differs}; merge only shards of "
                            "one `campaign run` command")
    data = {k: v for k, v in first.data.items() if k != "shard"}
    data["merged_from"] = [{"dir": str(c.root), "shard": c.data.get("shard", {}).get("index"),
                            "of": c.data.get("shard", {}).get("count")} for c in shards]
    data["plan_hash"] = plan_hash(first.data)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "campaign.json", data)
    merged = Campaign(out, data)
    conflicts, taken = [], {}
    for entry in merged.plan:
        trial_id = entry["id"]
        found = [c for c in shards if c.finished(trial_id)]
        if not found:
            continue
        verdicts = {_verdict(c, trial_id) for c in found}
        if len(verdicts) > 1:
            conflicts.append(f"{trial_id}: {', '.join(f'{c.root}: {_verdict(c, trial_id)}' for c in found)}")
        taken[trial_id] = found[0]
        copy_tree(found[0].trial_dir(trial_id), merged.trial_dir(trial_id))
    missing = [e["id"] for e in merged.plan if e["id"] not in taken]
    shrinks = _merge_shrinks(merged, shards)
    return merged, {"missing": missing, "conflicts": conflicts, "shrinks": shrinks, "shards": len(shards)}


def _merge_shrinks(merged: Campaign, shards: list[Campaign]) -> dict[str, list[str]]:
    """Per row, the smallest counterexample any shard shrank to (fewest faults, then the specs, then the shard's
    order), its shrink trials as they were; the others' records listed in it, their trials renamed."""
    out: dict[str, list[str]] = {}
    for prefix in dict.fromkeys(merged.rows().values()):
        records = []
        for k, shard in enumerate(shards):
            path = shard.root / "shrinks" / f"{prefix}.json"
            if path.exists():
                record = json.loads(path.read_text())
                if all(record != r for _, _, r in records):  # the same shard given twice: once
                    records.append((k, shard, record))
        if not records:
            continue
        records.sort(key=lambda t: (len(t[2]["minimal"]), t[2]["minimal"], t[0]))
        (k, kept_shard, kept), others = records[0], records[1:]
        for trial_id in {step["trial"] for step in kept["path"]} | {kept["minimal_trial"]}:
            if "-shrink-" in trial_id and kept_shard.trial_dir(trial_id).exists() \
                    and not merged.trial_dir(trial_id).exists():
                copy_tree(kept_shard.trial_dir(trial_id), merged.trial_dir(trial_id))
        listed = []
        for j, shard, record in others:
            index = shard.data.get("shard", {}).get("index", j + 1)
            renamed = {}
            for step in record["path"]:
                old = step["trial"]
                if "-shrink-" not in old or not shard.trial_dir(old).exists():
                    continue
                new = f"{prefix}-shrink-s{index}-{old.rsplit('-', 1)[1]}"
                renamed[old] = new
                if not merged.trial_dir(new).exists():
                    copy_tree(shard.trial_dir(old), merged.trial_dir(new))
            listed.append({"shard": index, "dir": str(shard.root), "minimal": record["minimal"],
                           "verdict": record["verdict"], "command": record["command"],
                           "minimal_trial": renamed.get(record["minimal_trial"], record["minimal_trial"]),
                           "trials": [renamed.get(s["trial"], s["trial"]) for s in record["path"]]})
        if listed:
            kept = {**kept, "others": listed}
        write_json(merged.root / "shrinks" / f"{prefix}.json", kept)
        out[prefix] = [f"shard {o['shard']}: {' '.join(o['minimal']) or 'no fault'}" for o in listed]
    return out
