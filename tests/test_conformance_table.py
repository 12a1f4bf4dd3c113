"""How a conformance row is judged from a finished campaign (no Spark: fabricated verdicts)."""

from __future__ import annotations

import pytest

from chaos.campaign import conformance as conf
from chaos.errors import UserError
from chaos.scenario.faults import parse_fault
from pipelines_under_test import CATALOGUE


def verdict(v: str, **extra) -> dict:
    return {"verdict": v, "effect": {"counts": {"lost": 3 if v == "at-most-once" else 0}}, "lost": [],
            "duplicated": [], "unexpected": [], **extra}


def judge(row: conf.Row, measured: str | None, trials: list[dict]) -> dict:
    summary = {"pipelines": {row.pipeline: {"verdict": measured}}, "skipped": []}
    return conf.table([row], summary, {row.pipeline: trials})["rows"][0]


APPEND = conf.Row("foreachBatch append", "passthrough-append", "at-least-once", "docs")
SOCKET = conf.Row("socket", "socket-source", conf.NOT_FAULT_TOLERANT, "docs")


def test_a_measurement_equal_to_the_docs_agrees_and_names_an_example():
    dup = {"id": 7, "batch": 1, "fault": "kill-driver@1:sink-done"}
    row = judge(APPEND, "at-least-once", [verdict("at-least-once", duplicated=[dup])])
    assert row["agrees"] is True and row["status"] == "agrees"
    assert row["example"] == "id 7 duplicated after kill-driver@1:sink-done"


def test_a_broken_promise_contradicts_and_a_stronger_one_is_not_reproduced():
    assert judge(APPEND, "none", [verdict("none")])["agrees"] is False
    stronger = judge(APPEND, "exactly-once", [verdict("exactly-once")])
    assert stronger["agrees"] is True and stronger["status"].startswith("not reproduced")
    assert conf.table([APPEND], {"pipelines": {}, "skipped": []}, {})["rows"][0]["agrees"] is None


def test_the_socket_row_agrees_with_a_failed_restart_or_a_loss():
    stalled = verdict("stalled", effect={"note": "not drained (driver exited 3 times on its own)"})
    row = judge(SOCKET, "stalled", [verdict("exactly-once"), stalled])
    assert row["agrees"] is True and "driver exited" in row["status"] and row["measured"] == "stalled"
    lost = judge(SOCKET, "at-most-once", [verdict("at-most-once")])
    assert lost["agrees"] is True and "3 events lost" in lost["status"]


def test_every_row_names_a_catalogue_pipeline_and_the_mix_opens_the_window_first():
    for row in conf.ROWS:
        assert row.pipeline in CATALOGUE
    mix = conf.standard_mix(CATALOGUE["passthrough-append"], 4)
    assert mix[0].startswith("kill-driver@1:sink-done") and mix[3] == mix[0]
    assert "state-commit" in conf.standard_mix(CATALOGUE["key-count"], 2)[1]
    assert "delay-sink" in conf.standard_mix(CATALOGUE["pg-two-phase"], 3)[2]
    with pytest.raises(UserError, match="no conformance row for nope"):
        conf.select_rows(["nope"])


def test_the_decommission_mix_opens_the_kill_windows_with_graceful_decommissions():
    mix = conf.standard_mix(CATALOGUE["key-count"], 3, "decommission")
    assert mix[0] == "decommission-executor@1:sink-write decommission-worker@3:reading" and mix[2] == mix[0]
    assert mix[1] == "decommission-worker@1:state-commit decommission-executor@3:sink-done"
    # Continuous processing reports no reading or state-commit: its own phases stand in.
    continuous = conf.standard_mix(CATALOGUE["continuous-map"], 2, "decommission")
    assert continuous == ["decommission-executor@1:sink-write decommission-worker@3:sink-write",
                          "decommission-worker@1:sink-write decommission-executor@3:sink-done"]
    for row in conf.ROWS:  # every row's mix parses and fits its pipeline's phases
        for schedule in conf.standard_mix(CATALOGUE[row.pipeline], 2, "decommission"):
            assert all(parse_fault(f).phase in CATALOGUE[row.pipeline].phases for f in schedule.split())


def test_the_report_shows_each_row_status_escaped():
    from reports.html import _conformance

    html = _conformance({"rows": [{"component": "socket <script>", "documented": conf.NOT_FAULT_TOLERANT,
                                   "measured": "stalled", "agrees": True, "status": "agrees: not drained",
                                   "trials": 1, "example": "id 3 lost"}]})
    assert "<script>" not in html and "socket &lt;script&gt;" in html
    assert '<span class="ok">agrees: not drained</span>' in html
