"""codesign.reproduce.run_cost: a reproduction's cost summed from its cached runs, and how reports state it."""

from __future__ import annotations

import json

from codesign.reproduce.run_cost import cost_cell, cost_text, run_cost
from codesign.sweep import result_path


def _store(out_dir, key, cost=None):
    path = result_path(out_dir / "tasks", key)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"task": {"key": key}, "result": {}, **({"cost": cost} if cost else {})}))


def test_the_cost_sums_the_cached_runs_and_halves_their_cpu_time_for_two_cores(tmp_path):
    _store(tmp_path, "a", {"wall_s": 5400.0, "cpu_s": 3600.0})
    _store(tmp_path, "b", {"wall_s": 2000.0, "cpu_s": 1800.0})
    cost = run_cost(tmp_path)
    assert cost == {"runs": 2, "recorded": 2, "wall_s": 7400.0, "cpu_s": 5400.0, "cores": 2, "model_s": 0.0}
    assert cost_cell(cost) == "45 min"  # 1.5 CPU-h over 2 cores
    assert cost_text(cost) == ("1.5 h CPU in 2 single-threaded training runs, about 45 min on 2 idle cores "
                               "(2.1 h of run wall time where they ran)")


def test_runs_cached_before_costs_were_recorded_are_named_not_counted(tmp_path):
    _store(tmp_path, "old")
    assert cost_cell(run_cost(tmp_path)) == "not recorded"
    assert "1 training runs were cached before" in cost_text(run_cost(tmp_path))
    _store(tmp_path, "new", {"wall_s": 600.0, "cpu_s": 600.0})
    assert cost_cell(run_cost(tmp_path)) == "5 min (partial)"
    assert cost_text(run_cost(tmp_path)).endswith("1 more runs were cached before costs were recorded and are not "
                                                  "counted")


def test_a_report_without_training_or_without_a_record_says_so(tmp_path):
    modelled = run_cost(tmp_path, model_s=77.6)
    _store(tmp_path, "quick", {"wall_s": 50.0, "cpu_s": 40.0})
    assert cost_cell(run_cost(tmp_path)) == "20 s"
    assert cost_cell(modelled) == "78 s, no training" and "no training runs; 78 s of modelling" in cost_text(modelled)
    assert cost_cell(None) == "not recorded" and "predates cost records" in cost_text(None)
