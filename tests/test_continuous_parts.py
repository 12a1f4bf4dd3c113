"""The continuous pipeline's parts that need no JVM: console parsing, rate offsets, event layout, phases."""

from __future__ import annotations

import polars as pl
import pytest

from chaos.campaign import conformance as conf
from chaos.errors import UserError
from chaos.run.admission import validate_schedule
from chaos.scenario.scenario import Scenario, generate_events
from chaos.store.checkpoint import read_offsets_file
from pipelines_under_test import CATALOGUE
from pipelines_under_test.continuous import SCHEMA, parse_console
from properties.attribution import batch_of_events
from properties.planning import coverage, plan_schedules

CONTINUOUS = CATALOGUE["continuous-map"]

CAPTURE = """-------------------------------------------
Batch: 0
-------------------------------------------
+---+------+
|id |mapped|
+---+------+
+---+------+

-------------------------------------------
Batch: 1
-------------------------------------------
+---+------+
|id |mapped|
+---+------+
|0  |1     |
|1  |4     |
|10 |31    |
+---+------+

-------------------------------------------
Batch: 2
-------------------------------------------
+---+------+
|id |mapped|
+---+------+
|11 |34    |
"""


def test_console_capture_gives_rows_and_deliveries_per_epoch_even_when_cut_short():
    rows, deliveries = parse_console(CAPTURE, incarnation=3)
    assert rows == [(0, 1, 1, 3), (1, 4, 1, 3), (10, 31, 1, 3), (11, 34, 2, 3)]
    assert deliveries == [(0, 3, 0), (1, 3, 3), (2, 3, 1)]  # epoch 2's table ends where the kill cut it


def test_output_and_deliveries_read_every_incarnation(tmp_path):
    (tmp_path / "console-0.txt").write_text(CAPTURE)
    (tmp_path / "console-1.txt").write_text(CAPTURE.split("Batch: 2")[0].replace("Batch: 0", "Batch: 5"))
    out = CONTINUOUS.read_output(tmp_path)
    assert out.height == 7 and out.filter(out["incarnation"] == 1)["id"].to_list() == [0, 1, 10]
    deliveries = CONTINUOUS.read_deliveries(tmp_path)
    assert sorted(deliveries.rows()) == [(0, 0, 0), (1, 0, 3), (1, 1, 3), (2, 0, 1), (5, 1, 0)]


def test_a_wrong_mapped_value_is_unexplained():
    rows, _ = parse_console(CAPTURE.replace("|10 |31    |", "|10 |32    |"), 0)
    output = pl.DataFrame(rows, schema=SCHEMA, orient="row")
    wrong = CONTINUOUS.unexplained(output, generate_events(Scenario("continuous-map", events=20)))
    assert [w["id"] for w in wrong] == [10] and "31" in wrong[0]["why"]


def test_rate_offsets_read_as_events_per_partition_and_attribute_ids_to_epochs(tmp_path):
    def offsets(p0: int, p1: int) -> str:
        return ('v1\n{"batchWatermarkMs":0,"batchTimestampMs":0,"conf":{}}\n'
                f'{{"1":{{"value":{p1},"runTimeMs":1}},"0":{{"value":{p0},"runTimeMs":1}}}}\n')

    (tmp_path / "0").write_text(offsets(-2, -1))  # the rate source's start: nothing emitted
    (tmp_path / "1").write_text(offsets(6, 7))  # partition 0 emitted 0,2,4,6; partition 1 emitted 1,3,5,7
    assert read_offsets_file(str(tmp_path / "0")) == [{"0": 0, "1": 0}]
    assert read_offsets_file(str(tmp_path / "1")) == [{"0": 4, "1": 4}]
    events = CONTINUOUS.place_events(generate_events(Scenario("continuous-map", events=12)), 2)
    assert events["partition"].to_list()[:4] == [0, 1, 0, 1] and events["offset"].to_list()[:4] == [0, 0, 1, 1]
    ranges = [{"batch": 0, "end": {"0": 0, "1": 0}}, {"batch": 1, "end": {"0": 4, "1": 4}},
              {"batch": 2, "end": {"0": 6, "1": 6}}]
    batches = dict(batch_of_events(events, ranges).iter_rows())
    assert [batches[i] for i in range(12)] == [1] * 8 + [2] * 4
    # A partition replayed from an older epoch reports a smaller end: ids keep the batch that read them first.
    replayed = ranges[:2] + [{"batch": 2, "end": {"0": 4, "1": 2}}, {"batch": 3, "end": {"0": 6, "1": 6}}]
    batches = dict(batch_of_events(events, replayed).iter_rows())
    assert [batches[i] for i in range(12)] == [1] * 8 + [3] * 4


def test_continuous_faults_keep_to_its_phases():
    with pytest.raises(UserError, match="never reach phase 'planned'"):
        validate_schedule(Scenario("continuous-map", events=1000, faults=["kill-driver@1:planned"]), CONTINUOUS)
    validate_schedule(Scenario("continuous-map", events=1000, faults=["kill-driver@1:sink-done"]), CONTINUOUS)
    plan = plan_schedules(5, ("kill-driver", "kill-executor"), 6, seed=3, phases=CONTINUOUS.phases)
    assert {phase for _, phase in coverage(plan)} <= set(CONTINUOUS.phases)
    mix = conf.standard_mix(CONTINUOUS, 4)
    assert mix[0] == mix[3] == "kill-driver@1:sink-done kill-driver@3:sink-write"
    assert {phase for _, phase in coverage(m.split() for m in mix)} <= set(CONTINUOUS.phases)
