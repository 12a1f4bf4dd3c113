"""Checkpoint damage (``damage-checkpoint@N:PHASE/MODE``): what each mode does to a checkpoint laid out as Spark lays
it out, and that a shrink tries the simpler modes first. No JVM; what Spark does with each damaged checkpoint
on the next start is measured by trials (docs/faults.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos.nemesis.actions import damage_checkpoint
from chaos.scenario.faults import DAMAGE_MODES, parse_fault
from properties.shrink import shrink_schedule


def checkpoint(root):
    """offsets/0..2, commits/0..2 (with Hadoop's .crc files), metadata, state of two operators."""
    for kind in ("offsets", "commits"):
        (root / kind).mkdir(parents=True)
        for n in range(3):
            (root / kind / str(n)).write_text(f'v1\n{{"n": {n}}}\n')
            (root / kind / f".{n}.crc").write_bytes(b"crc")
    (root / "metadata").write_text('{"id":"q"}')
    for op in ("0", "1"):
        for part in ("0", "1"):
            d = root / "state" / op / part
            d.mkdir(parents=True)
            for v in (1, 2, 3):
                (d / f"{v}.delta").write_bytes(bytes(range(64)))
    return root


@pytest.mark.parametrize("mode", DAMAGE_MODES)
def test_each_damage_mode_does_what_it_says(tmp_path, mode):
    root = checkpoint(tmp_path / "cp")
    detail = damage_checkpoint(root, mode)
    if mode == "delete-metadata":
        assert not (root / "metadata").exists()
    elif mode.startswith("retain-"):
        kind = mode.split("-")[1]
        assert sorted(p.name for p in (root / kind).iterdir()) == [".2.crc", "2"]
        assert detail["files"] == [f"{kind}/0", f"{kind}/1"]
    elif mode.startswith("unrename-"):  # the newest file back as its killed writer's temporary file
        kind = mode.split("-")[1]
        left = detail["left"]
        assert detail["file"] == f"{kind}/2" and left.startswith(".2.") and left.endswith(".tmp")
        assert sorted(p.name for p in (root / kind).iterdir()) == sorted(
            [f".{left}.crc", ".0.crc", ".1.crc", "0", "1", left])
        assert (root / kind / left).read_text() == 'v1\n{"n": 2}\n'
    elif mode == "delete-operator":
        assert detail["file"] in ("state/0", "state/1") and not (root / detail["file"]).exists()
        assert len(list((root / "state").iterdir())) == 1
    else:
        target = root / detail["file"]
        if mode.startswith("delete-"):
            assert not target.exists()
        elif mode.startswith("truncate-"):
            assert target.stat().st_size < len('v1\n{"n": 2}\n') or target.stat().st_size == 32
        else:  # flip-state: same size, 16 bytes inverted in the middle
            data = target.read_bytes()
            assert len(data) == 64 and data[24:40] == bytes(b ^ 0xFF for b in range(24, 40)) and data[:24] == \
                bytes(range(24))


def test_damage_of_what_is_not_there_yet_says_so(tmp_path):
    (tmp_path / "empty" / "offsets").mkdir(parents=True)
    (tmp_path / "empty" / "offsets" / "0").write_text("v1\n")
    for mode in ("delete-metadata", "retain-offsets", "flip-state", "delete-operator"):
        with pytest.raises(LookupError):
            damage_checkpoint(tmp_path / "empty", mode)


def test_a_shrink_tries_simpler_damage_first():
    tried = []

    def violates(faults):
        tried.append(faults)
        return any("damage-checkpoint" in f for f in faults) and any("kill-driver" in f for f in faults)

    minimal = shrink_schedule(["damage-checkpoint@2:committed/delete-metadata", "kill-driver@3:planned"], violates,
                              budget=40)
    assert parse_fault(minimal[0]).mode == DAMAGE_MODES[0]


@pytest.mark.parametrize("name, version", [
    ("12.delta", 12), ("12.snapshot", 12), ("3.zip", 3), ("3.changelog", 3),
    ("4_2b180d55-7d09-4e0a-952e-2c76bcdcf333.changelog", 4),  # checkpoint format v2: the version, then its id
    ("5_aca2e435-b22b-4a19-8077-0716f9c4c2eb.zip", 5),
    ("5_aca2e435-b22b-4a19-8077-0716f9c4c2eb.zip.crc", None), ("_metadata", None), (".3.delta.tmp", None),
    ("SstFiles", None), ("000008-1f2e.sst", None),
])
def test_state_files_of_both_checkpoint_formats_name_their_version(name, version):
    from chaos.nemesis.actions import state_version_of

    assert state_version_of(name) == version


def test_a_damaged_offsets_entry_is_read_from_the_history_of_its_planned_batch(tmp_path):
    """Offsets truncated after Spark planned from them: the checker keeps the batch's own end (what the source
    reported planning it), not none, which would fold the batch into the next and move the watermark model."""
    from chaos.store.result import batch_offsets

    ends = [{"0": 100, "1": 100}, {"0": 210, "1": 190}, {"0": 300, "1": 300}]
    for n, end in enumerate(ends):
        for what in ("offsets", "commits"):
            (tmp_path / what).mkdir(exist_ok=True)
        (tmp_path / "offsets" / str(n)).write_text(f'v1\n{{"batchWatermarkMs":0}}\n{json.dumps(end)}\n')
        (tmp_path / "commits" / str(n)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')
    damage_checkpoint(tmp_path, "truncate-offsets")  # the newest entry, offsets/2, cut to half
    records = [{"kind": "phase", "batch": n, "phase": "planned", "detail": {"start": {}, "end": end}}
               for n, end in enumerate(ends)]
    assert batch_offsets(tmp_path)[2]["end"] is None  # what the file alone says
    read = batch_offsets(tmp_path, records)
    assert [b["end"] for b in read] == ends and read[2]["start"] == ends[1] and read[2]["committed"]
    (tmp_path / "offsets" / "2").unlink()  # deleted after it ran: the commit says it ran, the history where to
    assert [b["end"] for b in batch_offsets(tmp_path, records)] == ends
    (tmp_path / "commits" / "2").unlink()  # neither file: the batch never ran as far as the checkpoint says
    assert [b["end"] for b in batch_offsets(tmp_path, records)] == ends[:2]


def test_entries_spark_purged_past_its_retention_are_read_from_the_history(tmp_path):
    """A processing-time query runs a batch without data at every trigger: 137 batches, and Spark keeps the last
    100 of each log. Batches 0-36 are gone from offsets/ and commits/; their ends come from the history, as
    committed, and the data batches are not folded into batch 37 (which read nothing new)."""
    from chaos.store.result import batch_offsets

    ends = [{"0": 100 * (n + 1)} for n in range(10)]
    for what in ("offsets", "commits"):
        (tmp_path / what).mkdir()
    for n in range(37, 137):
        (tmp_path / "offsets" / str(n)).write_text(f'v1\n{{"batchWatermarkMs":0}}\n{json.dumps(ends[-1])}\n')
        (tmp_path / "commits" / str(n)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')
    records = [{"kind": "phase", "batch": n, "phase": "planned", "detail": {"start": {}, "end": end}}
               for n, end in enumerate(ends)]
    read = batch_offsets(tmp_path, records)
    assert [b["batch"] for b in read[:11]] == [*range(10), 37]
    assert [b["end"] for b in read[:10]] == ends and all(b["committed"] for b in read)
    assert read[10]["start"] == read[10]["end"] == ends[-1]  # batch 37 read nothing


def test_deleting_an_operator_that_spark_writes_into_still_fires(tmp_path, monkeypatch):
    """Spark renames and removes temp files in the operator's directory while the damage walks it. The walk's
    FileNotFoundError half way used to leave the damage done but the fault recorded as not fired."""
    import shutil

    from chaos.nemesis import actions as nemesis

    root = checkpoint(tmp_path / "cp")
    real, walks = shutil.rmtree, []

    def racing_rmtree(path, ignore_errors=False, **kw):  # the first walk meets a temp file that vanished under it
        walks.append(path)
        if len(walks) == 1:
            next(Path(path).rglob("*.delta")).unlink()
            if not ignore_errors:
                raise FileNotFoundError(2, "No such file or directory", ".3.zip.crc.tmp")
        return real(path, ignore_errors=ignore_errors, **kw)

    monkeypatch.setattr(nemesis.shutil, "rmtree", racing_rmtree)
    detail = damage_checkpoint(root, "delete-operator")
    assert detail["how"] == "delete" and not (root / detail["file"]).exists() and "rewritten" not in detail
