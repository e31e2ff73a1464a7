"""The explorer on a CSB design (examples/digits_compressed_mlp.toml): block shape, lanes and groups vary.

The kept weights come from the golden loop's warm-up and pruning search
(shortened here). Three explored points are checked the way the hardware
would run them: the RTL's cycles on transactions of the step equal the
model's, the emulated board trains bit-identically to the golden loop and
its IP calls move exactly the modelled words in the modelled cycles, and the
chosen point fits per ``codesign design``.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest

from codesign.design import load_design
from codesign.design.explore import legal_specs
from codesign.design.explore_model import CSB_KNOBS, explore_family
from codesign.design.families.csb import csb_model
from codesign.design.explore_run import design_of_point
from codesign.design.families.csb import csb_setup_of
from codesign.boards import boards
from codesign.step.csb.time import block_nnz, csb_stages, csb_step_time, layer_calls
from codesign.loops.host_share import compressed_masks
from codesign.step.host import HostModel
from codesign.pe.csb.spec import CsbSpec
from codesign.pe.csb.stream import Op
from codesign.train.config import read_toml
from codesign.train.data import load_digits_dataset
from tests.design.conftest import check_block_on_rtl

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "digits_compressed_mlp.toml"
QUICK = {"epochs": 2, "warmup_epochs": 1}  # one float warm-up epoch (shortened), then the PE
# lanes and groups of the calibration grid at the design's 16 x 16 blocks: every confirmation is a calibrated build
# (lanes 8 on 4 groups is not, and it is dominated by lanes 8 on one group: never confirmed)
GRID_KNOBS = {"batch": (8, 16), "parallel": (1, 4), "copies": (1,)}
HOST = HostModel(fixed_s=1e-3, per_call_s=2e-5, source="test")
YOSYS_CACHE = Path.home() / ".cache" / "codesign" / "yosys"


@pytest.fixture(scope="module")
def design():
    return load_design(EXAMPLE, board_name="zedboard")


@pytest.fixture(scope="module")
def data():
    return load_digits_dataset()


@pytest.fixture(scope="module")
def pruned(design, data):
    return compressed_masks(csb_setup_of(design, **QUICK), data, max_steps=4)


@pytest.fixture(scope="module")
def masks(pruned):
    return pruned.masks


@pytest.fixture(scope="module")
def space(design, masks):
    setup = csb_setup_of(design)
    family = csb_model(setup.spec, masks, setup.batch_size, host=HOST)
    return explore_family(family, design.board, clock_mhz=100.0, knobs={"csb": GRID_KNOBS})


def _points(space) -> list[int]:
    """Lanes 16 on one group, lanes 8 on one group, lanes 16 on four groups: three distinct calibrated builds."""
    by = {(o.spec.batch, o.spec.parallel): i for i, o in enumerate(space.options[0])}
    return [by[(16, 1)], by[(8, 1)], by[(16, 4)]]


def test_the_knobs_take_the_values_the_spec_accepts():
    assert len(legal_specs(CsbSpec(), CSB_KNOBS)) == 3 * 3 * 6 * 3
    assert [s.batch for s in legal_specs(CsbSpec(), {"batch": (0, 1, 16, 17)})] == [1, 16]
    assert [s.parallel for s in legal_specs(CsbSpec(), {"parallel": (1, 8, 9)})] == [1, 8]


def test_blocks_and_calls_follow_the_mask():
    spec = CsbSpec(block_rows=4, block_cols=4, batch=4)
    mask = np.zeros((8, 12), dtype=bool)
    mask[0, 0] = mask[5, 9] = mask[6, 9] = True
    grid = block_nnz(mask, spec)
    assert grid.tolist() == [[1, 0, 0], [0, 0, 2]]
    # FP: one call per block column with entries, every lane chunk of 10 samples (3 chunks) on each block
    assert [count for _, count in layer_calls(spec, grid, Op.FP, 10)] == [3, 3]
    assert [count for _, count in layer_calls(spec, grid, Op.EB, 10)] == [3, 3]
    assert [count for _, count in layer_calls(spec, grid, Op.WG, 10)] == [2, 2, 2]
    assert [count for _, count in layer_calls(spec, grid, Op.UPD, 10)] == [2]


def test_the_step_counts_the_dense_macs_its_pruned_weights_stand_for():
    """A pruned step does its kept MACs and stands for the dense ones: FP and WG on every layer, EB but on the
    first, per sample; the equivalent throughput is the dense operations over the PEs' time."""
    spec = CsbSpec(block_rows=4, block_cols=4, batch=4)
    masks = [np.zeros((8, 12), dtype=bool), np.ones((4, 8), dtype=bool)]
    masks[0][0, 0] = masks[0][5, 9] = True
    _, totals = csb_stages(spec, masks, 10)
    assert totals["macs"] == (2 * 2 + 3 * 32) * 10 and totals["dense_macs"] == (2 * 96 + 3 * 32) * 10
    step = csb_step_time(spec, masks, 10, boards()["zedboard"], clock_mhz=100.0,
                         host=HostModel(fixed_s=0.0, per_call_s=0.0, source="test"))
    rates = step.throughput(dsp=4)
    assert rates["equivalent_gops_pe"] == pytest.approx(rates["useful_gops_pe"] * 2880 / 1000)
    assert rates["equivalent_ops_per_dsp_cycle"] == pytest.approx(2 * 2880 / (step.pe_s * 100e6 * 4))


def test_the_vectorised_space_equals_the_direct_model(space, design, masks):
    assert space.index.shape[0] == 4
    batch = csb_setup_of(design).batch_size
    for index in range(space.index.shape[0]):
        spec = space.chosen_options(index)[0].spec
        step = csb_step_time(spec, masks, batch, design.board, clock_mhz=100.0, host=HOST)
        assert space.pe_s[index] == pytest.approx(step.pe_s, rel=1e-12)
        assert space.memory_s[index] == pytest.approx(step.memory_s, rel=1e-12, abs=1e-15)
        assert space.total_s[index] == pytest.approx(step.total_s, rel=1e-12)
    by = {(o.spec.batch, o.spec.parallel): i for i, o in enumerate(space.options[0])}
    # an FC block has one output position: four groups share it, so they only cost
    assert space.pe_s[by[(16, 4)]] == space.pe_s[by[(16, 1)]]
    assert space.resources["dsp"][by[(16, 4)]] > space.resources["dsp"][by[(16, 1)]]
    assert space.pe_s[by[(16, 1)]] < space.pe_s[by[(8, 1)]]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("iverilog") is None, reason="Icarus Verilog (iverilog) is not on PATH")
def test_explored_builds_run_on_the_rtl_as_modelled(space, masks, tmp_path):
    """Three explored builds: FP, EB, WG and UPD transactions on the first layer's fullest block (random operands)
    through the RTL, every word right, their words and cycles the model's."""
    pytest.importorskip("cocotb_tools.runner")
    from codesign.pe.csb.format import encode

    rng = np.random.default_rng(0)
    for index in _points(space):
        spec = space.chosen_options(index)[0].spec
        matrix = encode(masks[0].astype(np.int8), block_rows=spec.block_rows, block_cols=spec.block_cols)
        check_block_on_rtl(spec, max(matrix.blocks(), key=lambda b: b.nnz), rng, tmp_path / str(index))


@pytest.mark.slow
def test_explored_points_train_on_the_emulated_board_bit_identically(space, design, data, tmp_path):
    """Three explored points on the emulated board: a shortened warm-up and four steps on the PE bit-identical to
    the golden loop, and a step's IP calls exactly the modelled stages (cycles, words in, words out)."""
    import warnings

    from codesign.deploy import CodesignOverlay
    from codesign.deploy.csb_training import CsbBoardTrainer
    from codesign.design.build import write_emulation_folder
    from codesign.loops.csb import CsbMlpTrainer

    raw = read_toml(EXAMPLE)
    for index in _points(space):
        _, chosen = design_of_point(raw, design, space.point(index))
        folder = write_emulation_folder(chosen, tmp_path / str(index))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            overlay = CodesignOverlay(folder, design=chosen, emulate=True)
        changes = {**QUICK, "schedule": "constant"}  # a learning rate left for the step after the fit
        board, golden = CsbBoardTrainer(overlay, chosen, **changes), CsbMlpTrainer(csb_setup_of(chosen, **changes))
        for trainer in (board, golden):
            trainer.fit(data, progress=False, max_steps=4)
        mine, theirs = board.read_weights(), golden.read_weights()
        assert mine["phase"] == theirs["phase"] == "fixed"
        for key in ("buffers", "masks"):
            assert all(np.array_equal(a, b) for a, b in zip(mine[key], theirs[key])), key
        spec, batch = chosen.instances[0].spec, board.setup.batch_size
        stages, _ = csb_stages(spec, board.masks, batch)
        logged = board.stage_log.stages
        x, y = data.train_x[:batch], data.train_y[:batch]
        before = len(logged)
        board.train_step(x, y)
        # one IP a stage: its port moves all of the stage's words
        assert logged[before:] == [(s.cycles, s.words_in, s.words_out, s.words_in, s.words_out) for s in stages]


@pytest.mark.slow
def test_explore_writes_reports_and_a_chosen_design_that_fits(design, tmp_path, explore_end_to_end):
    """End to end (the configuration's own warm-up and pruning) on calibrated builds: Yosys from the calibration's
    cache, or run where it lacks one."""
    run = explore_end_to_end(EXAMPLE, design, knobs={"csb": GRID_KNOBS}, cache_dir=YOSYS_CACHE, out=tmp_path / "out",
                             fitted_within=0.15)
    spec = run.again.instances[0].spec
    assert (spec.batch, spec.parallel) == (run.point["csb"]["batch"], run.point["csb"]["parallel"])
    throughput = run.performance["throughput"]
    assert throughput["equivalent_gops_pe"] > throughput["useful_gops_pe"]  # the warm-up pruned kernels
    assert throughput["reference_ops_per_dsp_cycle"] == pytest.approx(3.13, abs=0.01)


@pytest.mark.slow  # 15 s: prices the step and runs it on an emulated board
def test_the_family_prices_the_list_step_the_board_runs(design, masks):
    """The family's explorer prices an MLP's fixed-point step as the board runs it on RTL-route IPs (call lists, on
    one csb IP or shared among two): each point's PE, memory and host seconds are the list step model's, and only
    builds the lists run on (square blocks, lanes <= block_cols) are offered."""
    from codesign.design.families.csb import csb_list_model
    from codesign.pe.csb import encode
    from codesign.step.csb.list_time import csb_list_step
    from codesign.step.list_cycles import BOARD_DDR

    setup, host = csb_setup_of(design), HostModel(fixed_s=2e-4, per_call_s=0.0, source="test")
    family = csb_list_model(setup.spec, setup.layers, setup.batch_size, masks, host=host)
    knobs = {"block_rows": (8, 16), "block_cols": (16,), "batch": (8, 16), "parallel": (1,), "copies": (1, 2)}
    space = explore_family(family, design.board, clock_mhz=100.0, knobs={"csb": knobs})
    assert sorted((o.spec.block_rows, o.spec.batch, o.copies) for o in space.options[0]) == [
        (16, 8, 1), (16, 8, 2), (16, 16, 1), (16, 16, 2)]
    for index in range(space.index.shape[0]):
        option = space.chosen_options(index)[0]
        structures = [encode(m.astype(np.int8), block_rows=16, block_cols=16) for m in masks]
        step = csb_list_step(option.spec, setup.layers, setup.batch_size, structures, design.board, clock_mhz=100.0,
                             host_s=2e-4, host_source="test", ddr=BOARD_DDR, copies=option.copies)
        assert (space.pe_s[index], space.memory_s[index], space.host_s[index]) == pytest.approx(
            (step.pe_s, step.memory_s, step.host_s), rel=1e-12, abs=1e-15)
        assert family.step(space.chosen_options(index), design.board, 100.0).to_dict() == step.to_dict()
    # the host's work beside the last phase (the next batch written) is hidden there: the same step and space
    beside = csb_list_model(setup.spec, setup.layers, setup.batch_size, masks,
                            host=dataclasses.replace(host, beside_s=5e-5))
    space_b = explore_family(beside, design.board, clock_mhz=100.0, knobs={"csb": knobs})
    np.testing.assert_array_equal(space_b.host_s, space.host_s)
    for index in range(space.index.shape[0]):
        assert beside.step(space.chosen_options(index), design.board, 100.0).total_s == pytest.approx(
            family.step(space.chosen_options(index), design.board, 100.0).total_s, rel=1e-12)


@pytest.mark.slow  # prices the step's lists with and without LOSS calls
def test_a_build_with_the_loss_unit_is_priced_with_its_own_host(design, masks):
    """With a host measured on a build with the LOSS unit, ``loss`` is a knob: every point's host is its build's,
    in the space and in the exact step, and the LOSS calls are in the priced lists."""
    from codesign.design.families.csb import csb_list_model

    setup = csb_setup_of(design)
    host = HostModel(fixed_s=2e-4, per_call_s=0.0, source="test")
    with_loss = HostModel(fixed_s=1e-5, per_call_s=0.0, source="test, the LOSS unit")
    family = csb_list_model(setup.spec, setup.layers, setup.batch_size, masks, host=host, host_with_loss=with_loss)
    knobs = {"block_rows": (16,), "block_cols": (16,), "batch": (16,), "parallel": (1,), "loss": (False, True),
             "copies": (1, 2)}
    space = explore_family(family, design.board, clock_mhz=100.0, knobs={"csb": knobs})
    assert sorted((o.spec.loss, o.copies) for o in space.options[0]) == [(False, 1), (False, 2), (True, 1), (True, 2)]
    for index in range(space.index.shape[0]):
        options = space.chosen_options(index)
        step = family.step(options, design.board, 100.0)
        assert space.host_s[index] == step.host_s == (1e-5 if options[0].spec.loss else 2e-4)
        assert space.pe_s[index] == pytest.approx(step.pe_s, rel=1e-12)
    pe = {(o.spec.loss, o.copies): space.pe_s[i] for i in range(space.index.shape[0])
          for o in space.chosen_options(i)}
    assert pe[(True, 1)] > pe[(False, 1)]  # the LOSS calls take PE cycles


@pytest.mark.parametrize("copies, lists", [(1, 2), (4, 12)])
def test_the_host_of_a_list_step_is_measured_on_the_designs_copies(pruned, copies, lists):
    """The explorer measures the host on as many IPs as the design has (the shipped MLP's four: three phases of
    four lists each), as their step starts more lists over more phases; within the traffic goals either way."""
    from codesign.design.families.csb import measure_csb_list_host

    measured = measure_csb_list_host(pruned, repeats=1, copies=copies)
    batch_bytes = 4 * pruned.setup.batch_size * pruned.setup.layers[0]
    assert measured["lists"] == lists and 0 < measured["seconds"]
    assert 0 < measured["flushed_bytes"] <= 2 * batch_bytes + (64 << 10) and 0 < measured["read_bytes"] <= 64 << 10


def test_the_host_measured_here_splits_into_work_between_the_phases_and_beside_them():
    from codesign.design.explore_model import list_step_host

    host = list_step_host(None, lambda: {"seconds": 1e-3, "beside": [(0, 2, 2e-4)]}, lambda _: None)
    assert host.fixed_s == pytest.approx(8e-4) and host.beside_s == pytest.approx(2e-4) and not host.list_step
    assert list_step_host(None, lambda: {"seconds": 1e-3}, lambda _: None).beside_s == 0  # no work beside
    # a board's list-step report is split alike (host_share --lists): taken as it is, nothing measured here
    report = HostModel(fixed_s=3e-4, per_call_s=0.0, source="a board", list_step=True, beside_s=1e-4)
    assert list_step_host(report, lambda: 1 / 0, lambda _: None) == report
    # a per-call loop's report stands in with its per-step part, nothing beside
    per_call = HostModel(fixed_s=3e-4, per_call_s=1e-5, source="a board")
    assert list_step_host(per_call, lambda: 1 / 0, lambda _: None).beside_s == 0
