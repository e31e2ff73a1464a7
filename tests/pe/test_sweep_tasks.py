"""codesign.pe.sweep_tasks.estimate_task: (PE configuration, board) points as sweep tasks."""

from __future__ import annotations

import pytest

from codesign.boards import board
from codesign.pe import sweep_tasks as est
from codesign.hw import yosys as ys
from codesign.resources import data_dir
from codesign.sweep import grid_tasks, load_grid, read_result, run_sweep


@pytest.mark.parametrize("kwargs, match", [
    ({"pe": "tt3", "board": "arty9"}, "unknown board 'arty9'"),
    ({"pe": "tt9", "board": "zedboard"}, "tt9"),
    ({"pe": "tt3", "board": "zedboard", "lanes": 3}, "lanes"),
    ({"pe": "tt3", "board": "zedboard", "depth": 3}, "depth"),
])
def test_bad_points_fail_before_yosys_runs(monkeypatch, kwargs, match):
    def forbidden(*args, **kwargs):
        raise AssertionError("yosys was started before the arguments were checked")

    monkeypatch.setattr(ys, "synthesize_many", forbidden)
    with pytest.raises((ValueError, KeyError, TypeError), match=match):
        est.estimate_task(**kwargs)


def test_shipped_grid_is_configs_times_boards():
    tasks = load_grid(data_dir("examples") / "sweep_tt2_estimates.toml")
    assert len(tasks) == 8
    assert {task.kwargs["board"] for task in tasks} == {"zedboard", "ultra96v2"}
    assert all(task.function == "codesign.pe.sweep_tasks:estimate_task" and task.kwargs["pe"] == "tt2" for task in tasks)


@pytest.mark.slow
def test_a_sweep_estimates_each_point_against_its_boards_budget(tmp_path):
    tasks = grid_tasks("codesign.pe.sweep_tasks:estimate_task", {"board": ["zedboard", "ultra96v2"], "lanes": [1, 4]},
                       {"pe": "tt3", "max_j": 8})
    report = run_sweep(tasks, tmp_path, workers=0, progress=False)
    assert report.passed and len(report.done) == 4
    luts = {}
    for task in tasks:
        entry = read_result(tmp_path, task)
        target = board(task.kwargs["board"])
        assert (entry["board"], entry["family"], entry["part"]) == (target.name, target.yosys_family, target.part)
        assert entry["spec"]["lanes"] == task.kwargs["lanes"] and entry["spec"]["max_j"] == 8
        counts = ys.ResourceCounts(**entry["counts"])
        assert entry["utilisation_percent"]["lut"] == round(100 * counts.lut_sites / target.resources["lut"], 4)
        luts[(task.kwargs["board"], task.kwargs["lanes"])] = counts.lut_sites
    for name in ("zedboard", "ultra96v2"):
        assert luts[(name, 4)] > luts[(name, 1)]  # four lanes cost more logic than one
    assert run_sweep(tasks, tmp_path, workers=0, progress=False).skipped == [task.key for task in tasks]
