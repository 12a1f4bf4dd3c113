"""A job's own checkpoint location, recorded at each start: a new one per start begins the query over."""

from __future__ import annotations

from chaos.jobs.named_checkpoints import named_checkpoints, named_location, start_on, starts


def test_the_named_location_is_read_case_insensitively_and_start_wins():
    assert named_location({"checkpointlocation": "/a"}, {}) == "/a"
    assert named_location({"checkpointLocation": "/a"}, {"checkpointLocation": "/b"}) == "/b"
    assert named_location({"path": "/out"}, {}) is None
    # Spark's own default: the SQL setting and the query's name, or a random UUID per start for a query with none.
    assert named_location({}, {}, "/chk/", "orders") == "/chk/orders"
    assert named_location({}, {}, "/chk") != named_location({}, {}, "/chk")
    assert named_location({"checkpointLocation": "/a"}, {}, "/chk") == "/a"


def test_a_new_name_at_a_restart_moves_the_checkpoint_aside(tmp_path):
    checkpoint = str(tmp_path / "checkpoint")
    assert start_on(checkpoint, "/tmp/orders-1", 0) is None
    (tmp_path / "checkpoint" / "commits").mkdir(parents=True)
    (tmp_path / "checkpoint" / "commits" / "0").write_text("v1")
    assert start_on(checkpoint, "/tmp/orders-1", 1) is None  # the same location: it resumes
    assert (tmp_path / "checkpoint" / "commits" / "0").exists()
    assert start_on(checkpoint, "/tmp/orders-2", 2) == "/tmp/orders-1"  # a new one: it starts over
    assert not (tmp_path / "checkpoint").exists() and (tmp_path / "checkpoint.run-2" / "commits" / "0").exists()
    assert start_on(checkpoint, None, 3) is None  # no name: no change
    assert [s["fresh"] for s in starts(checkpoint)] == [False, False, True, False]


def test_the_answer_start_tells_a_location_per_start_without_any_restart(tmp_path):
    assert named_checkpoints(tmp_path) is None
    start_on(str(tmp_path / "checkpoint"), "/chk/orders", 0)
    (tmp_path / "oracle").mkdir()
    start_on(str(tmp_path / "oracle" / "checkpoint"), "/chk/orders", 0)
    assert named_checkpoints(tmp_path) == {"starts": ["/chk/orders"], "answer": "/chk/orders", "started_over": 0,
                                           "per_start": False}
    (tmp_path / "oracle" / "checkpoint.named.json").unlink()  # the answer's run named another: a name per start
    start_on(str(tmp_path / "oracle" / "checkpoint"), "/tmp/orders-x", 0)
    assert named_checkpoints(tmp_path)["per_start"] is True
