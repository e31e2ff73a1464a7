"""What the explorer tests share: an end-to-end run of ``explore_design`` whose reports and chosen design are checked
the same way for every family."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from codesign.design import design_from_dict
from codesign.design.explore_run import explore_design, write_reports
from codesign.train.config import read_toml

REPORTS = {"estimate_network_performance.json", "estimate_layer_cycles.json", "estimate_layer_resources.json",
           "explore_points.csv", "pareto.json", "pareto.csv", "pareto.png", "roofline.png", "chosen.toml"}


@dataclass
class Explored:
    """An explored example: the explorer's result, its chosen point, the chosen design read back from
    ``chosen.toml`` and ``estimate_network_performance.json``."""

    result: dict[str, Any]
    point: dict[str, Any]
    again: Any
    performance: dict[str, Any]


def explore_end_to_end(example: Path, design, *, knobs, cache_dir: Path, out: Path,
                       fitted_within: float | None = None) -> Explored:
    """Explore ``example``; check that the chosen point, confirmed by Yosys, fits with DSP and BRAM as counted (and
    LUT and FF within ``fitted_within``, relative, when given), that every report is written, one CSV row per point,
    and that the reported step is the chosen point's."""
    result = explore_design(read_toml(example), design, cache_dir=cache_dir, knobs=knobs, progress=lambda _: None)
    chosen = result["confirmed"][0]
    assert chosen["fits"], chosen
    for resource in ("dsp", "bram_36k"):  # counted, so Yosys must agree exactly
        assert chosen["yosys_total"][resource] == pytest.approx(chosen["point"][resource])
    for resource in ("lut", "ff") if fitted_within is not None else ():  # fitted: within the calibration's error
        assert chosen["yosys_total"][resource] == pytest.approx(chosen["point"][resource], rel=fitted_within)
    written = {p.name for p in write_reports(result, out, board=design.board)}
    assert REPORTS <= written
    assert len(list(csv.DictReader((out / "explore_points.csv").open()))) == result["space"].index.shape[0]
    point = result["space"].point(result["chosen"])
    performance = json.loads((out / "estimate_network_performance.json").read_text())
    assert performance["step"]["total_s"] == pytest.approx(point["total_s"], rel=1e-9)
    return Explored(result=result, point=point, again=design_from_dict(read_toml(out / "chosen.toml")),
                    performance=performance)


@pytest.fixture(name="explore_end_to_end")
def explore_end_to_end_fixture():
    return explore_end_to_end
