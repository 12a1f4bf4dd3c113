"""The Ray path's parts that need no cluster: a trial's directory through a tar, whole or not at all."""

from __future__ import annotations

import pytest

from chaos.campaign.on_ray import pack, unpack


def test_a_trial_directory_travels_whole_and_replaces_a_partial_one(tmp_path):
    src = tmp_path / "node" / "passthrough-append-000"
    (src / "checkpoint" / "offsets").mkdir(parents=True)
    (src / "checkpoint" / "offsets" / "0").write_text("v1\n{}\n")
    (src / "result.json").write_text('{"outcome": "drained"}')
    (src / "sink.parquet").write_bytes(bytes(range(256)) * 10)
    data = pack(src)
    dest = tmp_path / "campaign" / "trials" / "passthrough-append-000"
    dest.mkdir(parents=True)
    (dest / "history.jsonl").write_text("half of a trial the head saw die\n")
    unpack(data, dest)
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*")) == [
        "checkpoint", "checkpoint/offsets", "checkpoint/offsets/0", "result.json", "sink.parquet"]
    assert (dest / "sink.parquet").read_bytes() == (src / "sink.parquet").read_bytes()
    assert not list(dest.parent.glob(".*unpacking"))


def test_a_tar_that_reaches_outside_its_directory_is_refused(tmp_path):
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("../escaped")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(tarfile.OutsideDestinationError):
        unpack(buf.getvalue(), tmp_path / "trials" / "t-000")
    assert not (tmp_path / "trials" / "escaped").exists() and list((tmp_path / "trials").iterdir()) == []
