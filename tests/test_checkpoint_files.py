"""Reading what a killed driver left in a checkpoint."""

from __future__ import annotations

from chaos.store.checkpoint import unfinished_first_offsets


def test_a_first_offsets_write_a_killed_driver_left_is_told_apart(tmp_path):
    """Only temporary files in offsets/ and no batch: the leftover Spark 4.1+ refuses restarts on."""
    assert unfinished_first_offsets(tmp_path) == []
    offsets = tmp_path / "offsets"
    offsets.mkdir()
    (offsets / ".0.5e1f.tmp").write_text("v1\n")
    (offsets / "..0.5e1f.tmp.crc").write_bytes(b"crc")
    assert unfinished_first_offsets(tmp_path) == ["..0.5e1f.tmp.crc", ".0.5e1f.tmp"]
    (offsets / "0").write_text("v1\n")  # a batch logged: the restart is not a first start
    assert unfinished_first_offsets(tmp_path) == []
