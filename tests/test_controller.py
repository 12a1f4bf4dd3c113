"""The phase barrier over real loopback sockets: a report waits until its armed fault has fired."""

import errno
import threading
import time
from pathlib import Path

import pytest

from chaos.nemesis import barrier
from chaos.nemesis.controller import Controller, History
from chaos.scenario.faults import parse_fault


def make(faults, fire):
    history = History()
    return history, Controller(history, [parse_fault(f) for f in faults], fire)


def test_report_is_held_until_the_fault_fired_and_fires_once():
    release = threading.Event()
    fired = []

    def fire(fault, detail):
        fired.append((fault.spec, detail["pid"]))
        release.wait(10)
        return {"done": True}

    history, ctl = make(["kill-driver@3:sink-done"], fire)
    try:
        returned = threading.Event()
        t = threading.Thread(target=lambda: (barrier.report(ctl.address, 3, "sink-done", rows=5), returned.set()))
        t.start()
        assert not returned.wait(0.5), "the reporter must wait while the fault fires"
        release.set()
        assert returned.wait(5)
        # the replayed batch passes the same phase freely
        barrier.report(ctl.address, 3, "sink-done", rows=5)
        assert len(fired) == 1 and fired[0][0] == "kill-driver@3:sink-done"
        kinds = [(r["kind"], r["batch"], r["phase"]) for r in history.snapshot()]
        assert kinds == [("phase", 3, "sink-done"), ("fault", 3, "sink-done"), ("phase", 3, "sink-done")]
        attempts = [r["detail"]["attempt"] for r in history.snapshot() if r["kind"] == "phase"]
        assert attempts == [1, 2]
        assert ctl.unfired() == []
    finally:
        ctl.close()


def test_other_phases_and_batches_pass_and_unfired_faults_are_listed():
    history, ctl = make(["kill-executor@5:reading"], lambda f, d: {"done": True})
    try:
        for batch, phase in [(4, "reading"), (5, "planned"), (5, "sink-done")]:
            barrier.report(ctl.address, batch, phase)
        assert [f.spec for f in ctl.unfired()] == ["kill-executor@5:reading"]
        assert not [r for r in history.snapshot() if r["kind"] == "fault"]
    finally:
        ctl.close()


def test_a_disarmed_controller_records_phases_and_fires_nothing():
    """After the drain (a settling restart) phases are history, not triggers."""
    fired = []
    history, ctl = make(["kill-driver@5:sink-done"], lambda f, d: fired.append(f.spec) or {"done": True})
    try:
        ctl.disarmed = True
        barrier.report(ctl.address, 5, "sink-done")
        assert fired == [] and [f.spec for f in ctl.unfired()] == ["kill-driver@5:sink-done"]
        assert [(r["kind"], r["batch"]) for r in history.snapshot()] == [("phase", 5)]
    finally:
        ctl.close()


def test_concurrent_readers_of_one_batch_fire_the_fault_once():
    count = []

    def fire(fault, detail):
        count.append(detail["partition"])
        time.sleep(0.2)
        return {"done": True}

    history, ctl = make(["pause-executor@2:reading/1s"], fire)
    try:
        threads = [threading.Thread(target=barrier.report, args=(ctl.address, 2, "reading"),
                                    kwargs={"partition": p}) for p in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(5)
        assert len(count) == 1
        reads = [r for r in history.snapshot() if r["kind"] == "phase"]
        assert sorted(r["detail"]["partition"] for r in reads) == [0, 1, 2, 3]
        assert all(r["detail"]["attempt"] == 1 for r in reads)
    finally:
        ctl.close()


def test_a_fault_that_cannot_be_carried_out_is_recorded_not_raised():
    def fire(fault, detail):
        raise LookupError("no live executor of this application")

    history, ctl = make(["kill-executor@0:reading"], fire)
    try:
        barrier.report(ctl.address, 0, "reading")
        fault = [r for r in history.snapshot() if r["kind"] == "fault"][0]
        assert fault["detail"]["done"] is False
        assert "no live executor" in fault["detail"]["error"]
    finally:
        ctl.close()


def test_controller_listens_on_loopback_only():
    _, ctl = make([], lambda f, d: {})
    try:
        assert ctl.address.startswith("127.0.0.1:")
    finally:
        ctl.close()


def test_timed_faults_fire_at_their_seconds_where_the_stream_is_and_never_at_a_phase():
    fired = []
    history, ctl = make(["kill-driver@0.6s", "kill-executor@0.2s"],
                        lambda f, d: fired.append((f.spec, d, time.monotonic())) or {"done": True})
    try:
        barrier.report(ctl.address, 0, "planned")  # a phase never triggers a timed fault, whatever its batch
        barrier.report(ctl.address, -1, "planned")
        assert fired == []
        t0 = time.monotonic()
        ctl.start_clock()
        barrier.report(ctl.address, 2, "reading")
        deadline = time.monotonic() + 5
        while len(fired) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [f[0] for f in fired] == ["kill-executor@0.2s", "kill-driver@0.6s"]
        assert 0.1 < fired[0][2] - t0 < 0.5 and 0.5 < fired[1][2] - t0 < 1.0 and fired[0][1] == {}
        landed = [(r["batch"], r["phase"], r["detail"]["timed"]) for r in history.snapshot() if r["kind"] == "fault"]
        assert landed == [(2, "reading", True), (2, "reading", True)]
        assert ctl.unfired() == []
    finally:
        ctl.close()


def test_a_disarmed_or_closed_controller_fires_no_timed_fault():
    fired = []
    _, ctl = make(["kill-driver@0.3s"], lambda f, d: fired.append(f.spec) or {"done": True})
    ctl.start_clock()
    ctl.close()
    time.sleep(0.6)
    assert fired == []
    _, ctl = make(["kill-driver@0.2s"], lambda f, d: fired.append(f.spec) or {"done": True})
    try:
        ctl.disarmed = True
        ctl.start_clock()
        time.sleep(0.5)
        assert fired == [] and [f.spec for f in ctl.unfired()] == ["kill-driver@0.2s"]
    finally:
        ctl.close()


def test_a_history_write_on_a_full_disk_reaches_the_trial_not_the_reporting_thread():
    """/dev/full answers every write with ENOSPC: the record is kept, the add returns (a phase report is answered),
    and the trial gets the error when it ends."""
    history = History(Path("/dev/full"))
    record = history.add("phase", 3, "sink-done")
    history.add("phase", 3, "committed")
    assert [r["phase"] for r in history.snapshot()] == ["sink-done", "committed"] and record["batch"] == 3
    history.close()
    with pytest.raises(OSError) as raised:
        history.raise_write_error()
    assert raised.value.errno == errno.ENOSPC
    History(None).raise_write_error()  # nothing written, nothing failed


def test_an_executors_fault_waits_for_a_tasks_report_of_a_phase_its_tasks_report_too():
    """Spark's JDBC writer in a foreachBatch: the driver reports sink-write before the function, each task once its
    transaction committed; ``kill-executor`` lands at the task's, ``kill-driver`` at the driver's."""
    fired = []
    history = History()
    ctl = Controller(history, [parse_fault("kill-executor@2:sink-write"), parse_fault("kill-driver@2:sink-write")],
                     lambda fault, detail: fired.append((fault.spec, detail.get("partition"))) or {"done": True},
                     executor_phases=("sink-write",))
    try:
        barrier.report(ctl.address, 2, "sink-write")
        assert fired == [("kill-driver@2:sink-write", None)]
        barrier.report(ctl.address, 2, "sink-write", partition=1, source="jdbc")
        assert fired[1:] == [("kill-executor@2:sink-write", 1)] and ctl.unfired() == []
    finally:
        ctl.close()


def test_a_batch_planned_from_its_offsets_file_is_recorded_with_the_ends_the_file_names(tmp_path):
    """Read before the phase's faults fire: a damage-checkpoint that unrenames or truncates offsets/N then leaves
    the batch's ends in the history (chaos.store.result.batch_offsets reads them there), for Spark's Kafka source
    too, which reports nothing of its own."""
    from chaos.store.result import batch_offsets

    (tmp_path / "offsets").mkdir()
    (tmp_path / "commits").mkdir()
    (tmp_path / "offsets" / "4").write_text('v1\n{"batchWatermarkMs":0}\n{"topic-t":{"0":425,"2":78,"1":292}}\n')
    damaged = []

    def fire(fault, detail):
        (tmp_path / "offsets" / "4").rename(tmp_path / "offsets" / ".4.tmp")  # unrename-offsets
        damaged.append(detail.get("end"))
        return {"done": True}

    history = History()
    ctl = Controller(history, [parse_fault("damage-checkpoint@4:planned/unrename-offsets")], fire,
                     checkpoint=tmp_path)
    try:
        ctl.handle({"type": "phase", "batch": 4, "phase": "planned", "pid": 1,
                    "detail": {"source": "checkpoint", "after": "offsets/4"}})
    finally:
        ctl.close()
    (tmp_path / "commits" / "4").write_text("v1\n{}\n")
    assert damaged == [{"0": 425, "1": 292, "2": 78}]
    [entry] = batch_offsets(tmp_path, history.snapshot())
    assert entry == {"batch": 4, "start": None, "end": {"0": 425, "1": 292, "2": 78}, "committed": True}
