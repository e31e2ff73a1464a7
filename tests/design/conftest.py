"""What the explorer tests share: an end-to-end run of ``explore_design`` whose reports and chosen design are checked
the same way for every family."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from codesign.design import design_from_dict, load_design
from codesign.design.explore_run import explore_design, write_reports
from codesign.design.families.tt import explore_tt, tt_setup_of
from codesign.step.host import HostModel
from codesign.step.tt.time import tt_stages
from codesign.train.config import read_toml

# lanes x rows combinations that the calibration grids hold, so every Yosys confirmation is a shipped report
GRID_KNOBS = {"lanes": (2, 8, 16), "rows": (1, 4), "copies": (1, 2)}
HOST = HostModel(fixed_s=1e-3, per_call_s=2e-5, source="test")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
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
    and that the reported step is the chosen point's (unless the chosen design splits its forward contractions, or
    the explorer took the point's step as call lists: then the last Yosys entry is that step's builds', and the
    step the list step's)."""
    result = explore_design(read_toml(example), design, cache_dir=cache_dir, knobs=knobs, progress=lambda _: None)
    taken = result["instead"]
    chosen = result["confirmed"][-1 if taken else 0]
    counted = taken["resources"] if taken else chosen["point"]
    assert chosen["fits"], chosen
    for resource in ("dsp", "bram_36k"):  # counted, so Yosys must agree exactly
        assert chosen["yosys_total"][resource] == pytest.approx(counted[resource])
    for resource in ("lut", "ff") if fitted_within is not None else ():  # fitted: within the calibration's error
        assert chosen["yosys_total"][resource] == pytest.approx(counted[resource], rel=fitted_within)
    written = {p.name for p in write_reports(result, out, board=design.board)}
    assert REPORTS <= written
    assert len(list(csv.DictReader((out / "explore_points.csv").open()))) == result["space"].index.shape[0]
    point = result["space"].point(result["chosen"])
    performance = json.loads((out / "estimate_network_performance.json").read_text())
    again = design_from_dict(read_toml(out / "chosen.toml"))
    if taken:
        assert performance["step"]["total_s"] == performance["list_step"]["total_s"]
    elif not again.forward_split:  # the space prices every point unsplit; a split step is its own report's test
        assert performance["step"]["total_s"] == pytest.approx(point["total_s"], rel=1e-9)
    return Explored(result=result, point=point, again=again, performance=performance)


@pytest.fixture(scope="module")
def design():
    """digits_tt on the Ultra96-V2 (a module's own ``design`` fixture takes its place)."""
    return load_design(EXAMPLES / "digits_tt.toml", board_name="ultra96v2")


@pytest.fixture(scope="module")
def space(design):
    """The TT space of ``design`` on the calibration grid's builds, its host priced by :data:`HOST`."""
    setup = tt_setup_of(design)
    specs = {i.pe: i.spec for i in design.instances}
    return explore_tt(setup, design.board, bases={"tt1": specs["tt1"], "tt2": specs["tt2"]}, clock_mhz=100.0,
                      host=HOST, macs=tt_stages(setup, setup.hardware())[1]["macs"], tt3=specs["tt3"],
                      knobs={"tt1": GRID_KNOBS, "tt2": GRID_KNOBS})


@pytest.fixture(name="explore_end_to_end")
def explore_end_to_end_fixture():
    return explore_end_to_end


def check_block_on_rtl(spec, block, rng, work_dir: Path) -> None:
    """FP, EB, WG and UPD transactions of ``spec`` on ``block`` (random operands of the build's tile and lanes)
    through the CSB RTL: every word right, their words and stall-free cycles the step model's
    (:func:`codesign.step.csb.time.transaction`)."""
    import numpy as np

    from codesign.step.csb.time import transaction
    from codesign.hw.flow import run_rtl
    from codesign.pe import get_pe
    from codesign.pe.csb.stream import Op, encode_transaction, expected_output

    k, lanes = spec.kernel, spec.batch
    inputs = lambda channels: rng.integers(-128, 128, (channels, spec.in_h, spec.in_w, lanes))  # noqa: E731
    errors = lambda channels: rng.integers(-128, 128, (channels, spec.out_h, spec.out_w, lanes))  # noqa: E731
    grads = rng.integers(-2**20, 2**20, (block.nnz, k, k))
    sent = [encode_transaction(spec, Op.FP, index=block.index, weights=block.values, x=inputs(spec.block_cols),
                               acc=rng.integers(-2**20, 2**20, (spec.block_rows, spec.out_h, spec.out_w, lanes))),
            encode_transaction(spec, Op.EB, index=block.index, weights=block.values, dy=errors(spec.block_rows),
                               acc=rng.integers(-2**20, 2**20, (spec.block_cols, spec.in_h, spec.in_w, lanes))),
            encode_transaction(spec, Op.WG, index=block.index, x=inputs(spec.block_cols), dy=errors(spec.block_rows),
                               grads=grads),
            encode_transaction(spec, Op.UPD, index=block.index, shift=3,
                               buffer=rng.integers(-2**23, 2**23, (block.nnz, k, k)), grads=grads)]
    stimulus = [(words.astype(np.uint64), expected_output(spec, words).astype(np.uint64)) for words in sent]
    modelled = [transaction(spec, op, block.nnz) for op in (Op.FP, Op.EB, Op.WG, Op.UPD)]
    pe = get_pe("csb")
    vectors = pe.write_vectors(spec, stimulus, work_dir.with_suffix(".txt"))
    result = run_rtl(pe, spec, vectors, work_dir, bench_env={"STREAM_GAP_PROBABILITY": "0", "STREAM_BACKPRESSURE": "0"})
    assert (result.vectors, result.mismatches) == (4, 0), result.first_mismatches
    assert list(result.cycles) == [cycles for cycles, _, _ in modelled]
    assert [(i.size, o.size) for i, o in stimulus] == [(w_in, w_out) for _, w_in, w_out in modelled]
