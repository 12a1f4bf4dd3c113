"""The sink phases around a job's own writers land where a fault tells something: a foreach writer's ``sink-write``
after its ``open`` (what open committed is in place), ``sink-done`` only after a clean ``close``."""

from __future__ import annotations

from chaos.jobs.sink_phases import PhasedForeach, bracketed
from chaos.nemesis import barrier


class MarkingWriter:
    def __init__(self, calls: list) -> None:
        self.calls = calls

    def open(self, partition_id, epoch_id):
        self.calls.append(("open", epoch_id, partition_id))
        return partition_id != 1  # partition 1 was done before

    def process(self, row):
        self.calls.append(("process", row))

    def close(self, error):
        self.calls.append(("close", error))


def test_a_foreach_writers_write_phase_follows_its_open_and_done_a_clean_close(monkeypatch):
    calls: list = []
    monkeypatch.setattr(barrier, "report", lambda address, batch, phase, **detail: calls.append(
        (phase, batch, detail["partition"], detail["incarnation"])))
    writer = PhasedForeach(MarkingWriter(calls), "127.0.0.1:1", incarnation=2)
    assert writer.open(0, 7) is True
    writer.process("row")
    writer.close(None)
    assert writer.open(1, 7) is False  # the writer's answer stands, the phase reported all the same
    writer.close(RuntimeError("task failed"))
    assert [c[0] for c in calls] == ["open", "sink-write", "process", "close", "sink-done",
                                     "open", "sink-write", "close"]
    assert calls[1] == ("sink-write", 7, 0, 2) and calls[4] == ("sink-done", 7, 0, 2)


def test_a_row_function_is_a_foreach_writer_too(monkeypatch):
    phases: list = []
    monkeypatch.setattr(barrier, "report", lambda address, batch, phase, **detail: phases.append(phase))
    rows: list = []
    writer = PhasedForeach(rows.append, "127.0.0.1:1", incarnation=0)
    assert writer.open(3, 4) is True
    writer.process("a")
    writer.close(None)
    assert rows == ["a"] and phases == ["sink-write", "sink-done"]


def test_a_foreach_batch_function_runs_between_its_phases():
    seen: list = []
    wrapped = bracketed(lambda df, batch_id: seen.append(("function", batch_id)),
                        lambda batch_id, phase: seen.append((phase, batch_id)))
    wrapped("df", 5)
    assert seen == [("sink-write", 5), ("function", 5), ("sink-done", 5)]
