"""The public Hypothesis strategies: valid draws, replayable text, and the promised shrink order."""

from __future__ import annotations

import polars as pl
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

from chaos.scenario.faults import PHASES, parse_fault
from chaos.scenario.scenario import Scenario
from pipelines_under_test import resolve
from properties.strategies import Schedule, StreamSpec, crash_schedules, event_streams, scenarios

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(st.data())
def test_schedules_fit_the_stream_and_print_as_cli_arguments(data):
    batches = data.draw(st.integers(1, 30))
    schedule = data.draw(crash_schedules(batches, max_faults=4))
    assert len(schedule) <= 4
    assert len({(f.batch, f.phase) for f in schedule}) == len(schedule)
    assert all(0 <= f.batch < batches for f in schedule)
    text = str(schedule)
    reparsed = [parse_fault(t) for t in text.split("--fault ") if t.strip()]
    assert reparsed == list(schedule)
    Scenario("passthrough-append", events=batches * 200, faults=schedule.specs)  # validates batch range


@FAST
@given(event_streams(max_events=3000, late=True, resent=True))
def test_streams_have_unique_ids_and_honour_their_spec(spec):
    frame = spec.frame()
    assert frame.height == spec.events
    assert frame["id"].n_unique() == spec.events
    assert frame["key"].n_unique() <= spec.keys
    assert frame["partition"].max() < spec.partitions
    resent = frame.filter(pl.col("resent_of").is_not_null())
    if spec.resent_fraction == 0:
        assert resent.is_empty()
    originals = resent.join(frame, left_on="resent_of", right_on="id", suffix="_orig")
    assert originals.height == resent.height
    assert (originals["key"] == originals["key_orig"]).all()
    assert (originals["event_time"] == originals["event_time_orig"]).all()
    assert originals["resent_of_orig"].null_count() == originals.height  # copies name the first original
    if spec.late_fraction == 0:
        assert not frame["late"].any()


def test_late_events_lie_behind_the_watermark():
    frame = StreamSpec(events=2000, seed=3, late_fraction=0.05, max_disorder_ms=1000).frame()
    late = frame.filter("late")
    assert 50 <= late.height <= 150
    # 10 minutes behind the newest event before them: beyond any watermark delay of the catalogue.
    newest = frame["event_time"].cum_max()
    gap = (newest - frame["event_time"]).dt.total_milliseconds()
    assert (gap.filter(frame["late"]) >= 590_000).all()


def test_same_spec_same_rows():
    a = StreamSpec(events=500, seed=11, resent_fraction=0.05).frame()
    b = StreamSpec(events=500, seed=11, resent_fraction=0.05).frame()
    assert a.equals(b)


def _minimal(condition, batches=10):
    return find(crash_schedules(batches), condition, settings=settings(max_examples=500, database=None))


def test_schedules_shrink_to_fewer_faults_earlier_batches_simpler_actions():
    after_sink = _minimal(lambda s: any(f.phase in ("sink-write", "sink-done") for f in s))
    assert after_sink.specs == ["kill-driver@0:sink-write"]
    late_batch = _minimal(lambda s: any(f.batch >= 6 for f in s))
    assert late_batch.specs == ["kill-driver@6:planned"]
    paused = _minimal(lambda s: any(f.kind == "pause" for f in s))
    assert paused.specs == ["pause-driver@0:planned/2s"]
    damaged = _minimal(lambda s: any(f.action == "damage-checkpoint" for f in s))
    assert len(damaged) == 1 and damaged[0].action == "damage-checkpoint" and damaged[0].batch == 0
    two = _minimal(lambda s: len(s) >= 2)
    assert two.specs == ["kill-driver@0:planned", "kill-driver@0:reading"]
    assert isinstance(two, Schedule) and str(two) == "--fault kill-driver@0:planned --fault kill-driver@0:reading"


@FAST
@given(scenarios(resolve("passthrough-append"), streams=event_streams(max_events=1000), actions=("kill-driver",)))
def test_scenarios_are_replayable_scenarios(scenario):
    assert all(f.action == "kill-driver" for f in scenario.faults)
    again = Scenario(**{k: v for k, v in scenario.__dict__.items()})
    assert again == scenario
    assert set(PHASES) >= {f.phase for f in scenario.faults}
