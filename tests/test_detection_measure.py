"""benchmarks/detection.py's measure: each mode stops at its first find or at its CPU budget, a find past the
budget is censored, and distinct bugs per CPU-hour count each bug once however often it is violated."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.fixture()
def detection(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))  # as the script runs: its neighbours import by name
    spec = importlib.util.spec_from_file_location("detection", REPO / "benchmarks" / "detection.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "detection", module)
    spec.loader.exec_module(module)
    return module


def trials(*found: bool, cpu: float = 30.0) -> list[dict]:
    return [{"cpu": cpu, "found": f} for f in found]


def test_a_mode_stops_at_its_first_find(detection):
    script = trials(False, True, True, True)
    runs = detection.until_found(lambda k: script[k], budget=1000, limit=4)
    assert [r["found"] for r in runs] == [False, True]


def test_a_mode_starts_no_trial_once_its_budget_is_spent(detection):
    runs = detection.until_found(lambda k: trials(False)[0], budget=70, limit=10)
    assert len(runs) == 3  # 0, 30, 60 CPU-s spent when each started; 90 >= 70 stops it


def test_a_find_past_the_budget_is_censored_and_the_spending_capped(detection):
    assert detection.first_find(trials(False, True), budget=100) == {
        "trials_to_first": 2, "cpu_to_first": 60.0, "spent": 60.0}
    assert detection.first_find(trials(False, False, False, True), budget=100) == {
        "trials_to_first": None, "cpu_to_first": None, "spent": 100.0}


def row(detection, job: str, bug: bool, seed: int, runs: dict[str, list[dict]], budget: float = 100) -> dict:
    r = {"job": job, "bug": bug, "trigger": "default", "seed": seed, "T": 5.0, "runs": runs}
    for mode in detection.MODES:
        r[mode] = detection.first_find(runs[mode], budget)
    return r


def test_distinct_bugs_per_cpu_hour_count_each_bug_once(detection):
    # Two bugs: the planner finds both at its first trial (30 CPU-s each); random times find one at its third
    # trial and spend the budget on the other; with no fault, one bug (violated without any fault) is found at
    # once, in 10 CPU-s. A twin's violation is a false alarm.
    rows = [
        row(detection, "a", True, 0, {"planner": trials(True), "random": trials(False, False, True),
                                      "none": trials(False, False, False, False, cpu=25)}),
        row(detection, "b", True, 0, {"planner": trials(True), "random": trials(False, False, False, False),
                                      "none": trials(True, cpu=10)}),
        row(detection, "a-twin", False, 0, {"planner": trials(False, False, False, False),
                                            "random": trials(False, True, False, False),
                                            "none": trials(False, False, False, False, cpu=25)}),
    ]
    planner = detection.mode_figures(rows, "planner", within=3)
    assert planner["found"] == 2 and planner["rate_within"] == 1.0 and planner["median_trials"] == 1
    assert planner["bugs_per_cpu_hour"] == pytest.approx(2 / (60 / 3600), abs=0.1)
    random = detection.mode_figures(rows, "random", within=2)
    assert random["found"] == 1 and random["rate_within"] == 0.0  # found at trial 3, not within 2
    assert random["bugs_per_cpu_hour"] == pytest.approx(1 / (190 / 3600), abs=0.1)  # 90 + the capped 100
    assert random["false_alarms"] == 1 and random["twin_trials"] == 4
    none = detection.mode_figures(rows, "none", within=3)
    assert none["bugs_per_cpu_hour"] == pytest.approx(1 / (110 / 3600), abs=0.1)
    total = detection.totals(rows, within=3)["default"]
    assert total["ratio"]["median"] == pytest.approx(2 / 60 * 190, rel=1e-2)  # planner over random, per CPU-s
    assert total["ratio_lower_bound"] is False


def test_the_spread_is_over_seeds_and_a_baseline_that_finds_nothing_gives_a_lower_bound(detection):
    never = trials(False, False, False, False)
    rows = [row(detection, "a", True, seed, {"planner": trials(True, cpu=cpu), "random": never, "none": never})
            for seed, cpu in ((0, 20.0), (1, 40.0), (2, 50.0))]
    total = detection.totals(rows, within=3)["default"]
    per_hour = total["modes"]["planner"]["bugs_per_cpu_hour"]
    assert (per_hour["min"], per_hour["median"], per_hour["max"]) == (72.0, 90.0, 180.0)
    assert per_hour["seeds"] == 3 and total["modes"]["random"]["found"]["median"] == 0
    assert total["ratio_lower_bound"] is True and total["ratio"]["min"] == pytest.approx(2.0)


def test_a_find_is_shrunk_with_real_trials_and_its_cpu_counted_apart(detection, monkeypatch, tmp_path):
    from chaos.scenario.scenario import Scenario

    tried = []

    def one(harness, scenario, run_dir):  # the second fault alone still violates
        tried.append(scenario.specs)
        return {"cpu": 20.0, "found": scenario.specs == ["kill-driver@4:sink-done"]}

    monkeypatch.setattr(detection, "one", one)
    base = Scenario(pipeline="passthrough-append", faults=["kill-driver@3:sink-write", "kill-driver@4:sink-done"])
    s = detection.shrunk(None, "passthrough-append", base, 3, tmp_path)
    assert s["minimal"] == ["kill-driver@4:sink-done"] and s["trials"] == len(tried) <= 3
    assert s["cpu"] == 20.0 * len(tried)


def test_jobs_that_name_another_pyspark_are_grouped_to_run_on_it(detection):
    """The Delta and Kafka-sink jobs run on the PySpark Delta and Spark's Kafka connector are served for; the rest
    on this interpreter's, in the corpus's order."""
    truths = detection.load_truths()
    groups = detection.by_spark(list(truths["jobs"]), truths)
    here = detection.current_version()
    assert groups[here] == [n for n, j in truths["jobs"].items() if "spark" not in j]
    assert {v: sorted(names) for v, names in groups.items() if v != here} == {
        "4.2.0": ["delta_append", "delta_merge_outer_txn", "delta_merge_txn", "delta_txn_append", "kafka_producer",
                  "kafka_txn_marker"]}
    with pytest.raises(SystemExit, match="delta_append: pyspark 9.9.9 is not added"):
        detection.rows_on("9.9.9", ["delta_append"], None)


def test_a_mode_left_out_runs_no_trial_and_prints_as_not_run(detection, monkeypatch, tmp_path, capsys):
    """``--modes planner`` on a twin: its false alarms are the planner's trials alone, with no no-fault trial to
    time random faults that will not run."""
    from chaos.scenario.scenario import Scenario

    tried = []

    def one(harness, scenario, run_dir):
        tried.append(scenario.specs)
        return {"cpu": 40.0, "found": False, "seconds": 10.0}

    monkeypatch.setattr(detection, "one", one)
    plan = [Scenario(pipeline="p", faults=["kill-driver@1:sink-done"])] * 12
    monkeypatch.setattr(detection, "planned", lambda *a: plan)
    truths = detection.load_truths()
    row = detection.run_job(None, "append_on_conflict", truths, "default", 0, 100, 2000, tmp_path,
                            modes=("planner",))
    assert len(row["runs"]["planner"]) == 3 and row["runs"]["none"] == row["runs"]["random"] == []
    assert all(specs == ["kill-driver@1:sink-done"] for specs in tried) and row["T"] is None
    total = detection.totals([row], 3)
    assert total["default"]["modes"]["planner"]["false_alarms"]["median"] == 0
    detection.print_table([row], total, 100, 3)
    out = capsys.readouterr().out
    assert out.count("not run") == 2 and "planner / random" not in out  # no bug job: no ratio


def test_runs_measured_in_parts_merge_into_one_table_with_each_row_s_budget(detection, tmp_path, capsys):
    """A corpus measured in parts (a budget and a seed per part) gives one table: a row keeps its own budget, a
    later run's row replaces an earlier one's, and each seed gets its own line with its ratio."""
    import json

    def part(name: str, budget: float, rows: list[dict]) -> Path:
        (tmp_path / name).mkdir()
        (tmp_path / name / "detection.json").write_text(json.dumps({"budget_cpu_s": budget, "rows": rows}))
        return tmp_path / name

    never = trials(False, False, False, False, False)
    cheap = part("a", 100, [row(detection, "a", True, 0, {"planner": trials(True), "random": never, "none": []}),
                            row(detection, "a", True, 1, {"planner": trials(False), "random": never, "none": []})])
    dear = part("b", 250, [row(detection, "b", True, 0, {"planner": trials(False, False, False, False, True),
                                                         "random": trials(True), "none": []}, budget=250)])
    again = part("c", 100, [row(detection, "a", True, 1, {"planner": trials(False, True), "random": never,
                                                          "none": []})])
    rows = detection.merged_rows([cheap, dear, again], budget=100)
    assert [(r["job"], r["seed"], r["budget"]) for r in rows] == [("a", 0, 100), ("a", 1, 100), ("b", 0, 250)]
    assert rows[1]["planner"]["trials_to_first"] == 2  # part c's row, not part a's
    assert rows[2]["planner"] == {"trials_to_first": 5, "cpu_to_first": 150.0, "spent": 150.0}  # in 250 CPU-s
    total = detection.totals(rows, within=3)
    detection.print_table(rows, total, 100, 3)
    out = capsys.readouterr().out
    assert "not in 250 CPU-s (5)" not in out and "not in 100 CPU-s (5)" in out  # random of a: its own budget
    assert "default seed 0: planner 2/2 found" in out and "default seed 1: planner 1/1 found" in out
    # seed 1's random times find nothing: its ratio counts one find, a lower bound
    assert total["default"]["ratios"] == {0: pytest.approx(2 / 180 * 130, rel=1e-2),
                                          1: pytest.approx(1 / 60 * 100, rel=1e-2)}
    with pytest.raises(detection.UserError, match="--merge .*nowhere: no detection.json"):
        detection.merged_rows([tmp_path / "nowhere"], budget=100)


def test_a_twin_runs_its_trials_whatever_they_cost_when_told(detection, monkeypatch, tmp_path):
    """``--twin-trials 3``: a twin's false alarm is asked of the 3 trials a campaign runs, not of as many as a CPU
    budget buys; a bug's planner still stops at its budget."""
    from chaos.scenario.scenario import Scenario

    monkeypatch.setattr(detection, "one", lambda harness, scenario, run_dir: {"cpu": 80.0, "found": False})
    monkeypatch.setattr(detection, "planned", lambda *a: [Scenario(pipeline="p", faults=[])] * 12)
    truths = detection.load_truths()
    twin = detection.run_job(None, "append_on_conflict", truths, "default", 0, 100, 2000, tmp_path / "t",
                             modes=("planner",), twin_trials=3)
    bug = detection.run_job(None, "append_insert", truths, "default", 0, 100, 2000, tmp_path / "b",
                            modes=("planner",), twin_trials=3)
    assert len(twin["runs"]["planner"]) == 3 and len(bug["runs"]["planner"]) == 2  # 0, then 80 < 100 CPU-s spent
