import json
import urllib.request

import polars as pl
import pytest

from chaos.errors import UserError
from chaos.scenario.scenario import Scenario, generate_events
from chaos.stream.eventlog import EventLog, EventLogServer


def test_events_are_a_function_of_the_seed():
    a = generate_events(Scenario("passthrough-append", events=500, seed=7))
    b = generate_events(Scenario("passthrough-append", events=500, seed=7))
    c = generate_events(Scenario("passthrough-append", events=500, seed=8))
    assert a.equals(b)
    assert not a.equals(c)
    assert a["id"].n_unique() == 500
    assert set(a.columns) == {"id", "key", "value", "event_time", "partition", "offset", "late", "resent_of"}


def test_offsets_are_dense_per_partition_and_disorder_is_bounded():
    s = Scenario("passthrough-append", events=1000, seed=3, partitions=3, max_disorder_ms=500)
    ev = generate_events(s)
    for p in range(3):
        part = ev.filter(pl.col("partition") == p).sort("id")
        assert part["offset"].to_list() == list(range(part.height))
    ms = ev.sort("id")["event_time"].dt.epoch("ms")
    # event time runs ahead 100 ms per event, minus at most 500 ms of disorder
    assert (ms.diff().drop_nulls() >= 100 - 500).all()
    assert (ms.diff().drop_nulls() < 0).any(), "some disorder must exist"


def test_batches_cover_fixed_offsets_in_every_replay():
    s = Scenario("passthrough-append", events=1050, seed=1, events_per_batch=100, partitions=2)
    log = EventLog(generate_events(s), 2)
    start, cuts = log.offsets_at(0), []
    while sum(start.values()) < 1050:
        end = log.advance(start, 100)
        cuts.append((start, end))
        start = end
    assert len(cuts) == s.batches == 11
    assert [sum(e.values()) - sum(b.values()) for b, e in cuts] == [100] * 10 + [50]
    # replaying from any recorded start yields the same end
    for begin, end in cuts:
        assert log.advance(begin, 100) == end
    # each batch holds exactly the ids of its global slice
    for n, (begin, end) in enumerate(cuts):
        ids = sorted(r[0] for p in range(2) for r in log.read(p, begin[str(p)], end[str(p)]))
        assert ids == list(range(n * 100, min((n + 1) * 100, 1050)))


def test_server_speaks_http_on_loopback():
    s = Scenario("passthrough-append", events=300, seed=2)
    server = EventLogServer()
    try:
        server.load(generate_events(s), s.partitions)
        assert server.url.startswith("http://127.0.0.1:")
        meta = json.loads(urllib.request.urlopen(f"{server.url}/meta").read())
        assert meta == {"partitions": 2, "total": 300}
        start = urllib.parse.quote(json.dumps({"0": 0, "1": 0}))
        end = json.loads(urllib.request.urlopen(f"{server.url}/advance?from={start}&max=120").read())
        assert sum(end.values()) == 120
        rows = json.loads(urllib.request.urlopen(f"{server.url}/read?p=0&start=0&end={end['0']}").read())
        assert len(rows) == end["0"] and all(r[4] == 0 for r in rows)
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(f"{server.url}/read?p=0")
    finally:
        server.close()


def test_fault_beyond_the_stream_is_a_user_error():
    with pytest.raises(UserError, match="batches 0..9"):
        Scenario("passthrough-append", events=2000, faults=["kill-driver@10:sink-done"])
    with pytest.raises(UserError, match="malformed"):
        Scenario("passthrough-append", faults=["nonsense"])


def test_scenario_round_trips(tmp_path):
    s = Scenario("passthrough-idempotent", events=900, seed=4, faults=["kill-driver@3:sink-done"])
    s.save(tmp_path / "scenario.json")
    assert Scenario.load(tmp_path / "scenario.json") == s
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(UserError, match="bad.json is corrupt"):
        Scenario.load(tmp_path / "bad.json")


def test_a_replay_command_names_the_spark_the_trial_ran_on_when_it_is_not_the_installed_one(monkeypatch):
    from chaos.machine import spark_versions
    from chaos.scenario.faults import parse_fault

    scenario = Scenario(pipeline="delta-append", events=1000, seed=4, faults=[parse_fault("kill-driver@2:sink-done")])
    assert scenario.command("4.2.0").startswith("streamchaos --spark 4.2.0 trial delta-append --events 1000 --seed 4")
    assert scenario.command().startswith("streamchaos trial delta-append")
    monkeypatch.setattr(spark_versions, "current_version", lambda: "4.2.0")
    monkeypatch.delenv(spark_versions.BASE_SPARK_VAR, raising=False)
    assert spark_versions.spark_option("4.2.0") is None and spark_versions.spark_option("4.1.1") == "4.1.1"
    monkeypatch.setenv(spark_versions.BASE_SPARK_VAR, "4.3.0")  # a process on the added 4.2.0: the base is 4.3.0
    assert spark_versions.spark_option("4.2.0") == "4.2.0" and spark_versions.spark_option(None) is None
