"""benchmarks/soak.py judges drift only over enough trials: a short soak must not cry wolf."""

from __future__ import annotations

import importlib.util
import sys

from tests.conftest import REPO

KEYS = ("seconds", "peak_rss_mib", "peak_pss_mib", "fds", "threads", "processes", "tmp_mib", "workdir_mib",
        "trial_dir_mib", "logs_mib")


def soak_module(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))  # as the script runs: its neighbours import by name
    spec = importlib.util.spec_from_file_location("soak", REPO / "benchmarks" / "soak.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "soak", module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def result(processes: list[int]) -> dict:
    rows = [{"trial": f"t-{k:03d}", "pipeline": "passthrough-append", "truth": "at-least-once",
             "verdict": "at-least-once", "faults": [], **{key: 10.0 for key in KEYS}, "processes": n}
            for k, n in enumerate(processes)]
    return {"rows": rows, "errors": [], "left": [], "wall_s": 60.0, "settling_s": 1.0, "cpu_s_per_trial": 1.0,
            "peak_rss_mib": 1, "peak_pss_mib": 1}


def test_six_trials_print_drift_without_judging_it(tmp_path, capsys, monkeypatch):
    soak = soak_module(monkeypatch)
    assert soak.report_soak(result([16, 16, 17, 18, 19, 19]), tmp_path) is True
    assert "too few trials to judge drift: 3 point(s)" in capsys.readouterr().out


def test_a_real_upward_slope_over_enough_trials_fails(tmp_path, capsys, monkeypatch):
    soak = soak_module(monkeypatch)
    assert soak.report_soak(result([16, 16, *range(17, 31)]), tmp_path) is False
    out = capsys.readouterr().out
    assert "too few trials" not in out and "UPWARD" in out


def test_the_soaks_campaign_runs_each_control_with_its_truth_and_one_under_its_variant(tmp_path, monkeypatch):
    soak = soak_module(monkeypatch)
    for controls in (soak.CONTROLS, soak.NODE_CONTROLS):
        cluster = "docker" if controls is soak.NODE_CONTROLS else "standalone"
        spec = soak.plan_spec(controls, 2 * len(controls), 0, 2000, 200, cluster)
        campaign = soak.create(tmp_path / cluster, controls, spec)
        assert campaign.spec.cluster == cluster
        ran = {e["pipeline"] for e in campaign.plan} | {s["pipeline"] for s in campaign.data["skipped"]}
        assert ran == {c.pipeline for c in controls}
        for entry in campaign.plan:
            conf = entry["scenario"]["conf"]
            assert soak.TRUTH[soak.truth_key(entry["pipeline"], conf)] in ("exactly-once", "at-least-once",
                                                                         "incorrect")
            control = next(c for c in controls if c.pipeline == entry["pipeline"])
            assert conf == dict(control.conf) and entry["row"] == control.row
            assert " ".join(entry["scenario"]["faults"]) in control.schedules
    variant = [c for c in soak.CONTROLS if c.conf]
    assert len(variant) == 1 and "RocksDBStateStoreProvider" in variant[0].row
    assert sum(".py:run?" in c.pipeline for c in soak.CONTROLS) == 2  # two users' jobs as written
