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
