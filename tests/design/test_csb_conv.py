"""A conv network's CSB step (examples/digits_compressed.toml, a pruned ResNet-8): its layers as the CSB PE computes
them, the host's share, and the explorer's space over block shape, lanes, groups and output tile."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import numpy as np
import pytest

from codesign.boards import boards
from codesign.design.csb_conv import conv_layers, measure_conv_host, pruned_trainer
from codesign.design.explore_model import CSB_TILE_KNOBS, explore_family
from codesign.design.families.csb import csb_model
from codesign.design.point import design_from_dict
from codesign.step.csb.time import CsbLayer, block_nnz, csb_stages, csb_step_time, transaction
from codesign.step.host import HostModel
from codesign.pe.csb.spec import CsbSpec
from codesign.pe.csb.stream import Op
from codesign.train.config import read_toml
from tests.design.conftest import check_block_on_rtl

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "digits_compressed.toml"
HOST = HostModel(fixed_s=1e-3, per_call_s=2e-5, source="test")


@pytest.fixture(scope="module")
def design():
    raw = copy.deepcopy(read_toml(EXAMPLE))
    raw["optim"]["epochs"] = 2
    raw["techniques"]["compress"]["warmup_epochs"] = 1  # one float epoch, then the pruning search
    return design_from_dict(raw)


@pytest.fixture(scope="module")
def trainer(design):
    return pruned_trainer(design.training, progress=lambda _: None)


@pytest.fixture(scope="module")
def layers(trainer):
    return conv_layers(trainer)


def test_a_layer_is_cut_into_the_builds_output_tiles():
    layer = CsbLayer(mask=np.ones((4, 2), bool), height=8, width=6, kernel=3, positions=12)
    assert layer.tiles(CsbSpec(kernel=3, out_h=4, out_w=4)) == 2 * 2
    assert layer.tiles(CsbSpec(kernel=5, out_h=3, out_w=1)) == 3 * 6
    assert layer.macs() == 8 * 9 * 12 and CsbLayer(mask=np.eye(3, dtype=bool)).macs(dense=True) == 9
    with pytest.raises(ValueError, match="does not fit a build of kernel 1"):
        layer.tiles(CsbSpec())
    with pytest.raises(ValueError, match="outputs x inputs"):
        CsbLayer(mask=np.ones(3, bool))
    with pytest.raises(ValueError, match="height must be an int >= 1"):
        CsbLayer(mask=np.ones((1, 1), bool), height=0)


def test_a_conv_step_runs_every_tile_and_lane_chunk_on_every_kept_block():
    spec = CsbSpec(block_rows=4, block_cols=4, kernel=3, out_h=2, out_w=4, batch=4)
    mask = np.zeros((8, 4), bool)
    mask[0, 0] = mask[1, 2] = mask[5, 3] = True
    conv = CsbLayer(mask=mask, height=4, width=8, kernel=3, positions=32)
    head = CsbLayer(mask=np.ones((2, 8), bool))  # FC: one tile
    stages, totals = csb_stages(spec, [conv, head], 10)
    chunks, tiles = 3, 2 * 2
    fp = transaction(spec, Op.FP, 2)[0] * chunks * tiles + transaction(spec, Op.FP, 1)[0] * chunks * tiles
    assert stages[0].cycles == fp  # the conv's one block column, both blocks, every chunk and tile
    # the conv keeps two non-empty blocks, the head two (of 2 x 4 entries each); the head is one tile
    transactions = {"FP": 2 * chunks * tiles + 2 * chunks, "WG": 2 * chunks * tiles + 2 * chunks,
                    "EB": 2 * chunks, "UPD": 2 + 2}
    assert totals["calls"] == sum(transactions.values())
    assert totals["macs"] == (3 * 3 * 9 * 32 + 3 * 16 - 3 * 9 * 32) * 10  # the first layer has no EB
    assert totals["dense_macs"] == (2 * 32 * 9 * 32 + 3 * 16) * 10


def test_a_stride_two_conv_steps_at_stride_two_where_the_build_runs_it():
    """On a build with max_stride 2 a stride-2 3 x 3 conv's 8 x 8 map becomes a 4 x 4 output map stepped at stride 2:
    a quarter of the tiles, each transaction's X and EB sums the stride-2 tile, the MACs the useful ones; a build
    without stride 2 computes the whole map for the host to subsample."""
    mask = np.ones((8, 8), bool)
    layer = CsbLayer(mask=mask, height=8, width=8, kernel=3, positions=16, stride=2)
    one, two = CsbSpec(block_rows=8, block_cols=8, kernel=3, out_h=2, out_w=2, batch=4), \
        CsbSpec(block_rows=8, block_cols=8, kernel=3, out_h=2, out_w=2, batch=4, max_stride=2)
    assert (layer.pe_stride(one), layer.tiles(one), layer.pe_stride(two), layer.tiles(two)) == (1, 16, 2, 4)
    assert transaction(two, Op.FP, 64, 2)[1] == transaction(one, Op.FP, 64)[1] + 8 * (25 - 16) * 4 // 4
    fp_one, fp_two = (csb_stages(spec, [CsbLayer(mask=np.ones((2, 2), bool)), layer], 4)[0][1] for spec in (one, two))
    compute = 64 * 9 * 4  # cycles of one transaction's MACs: 64 entries, 9 taps, 4 positions on one group
    assert fp_one.cycles == 16 * transaction(one, Op.FP, 64)[0] and fp_two.cycles == 4 * transaction(two, Op.FP, 64, 2)[0]
    assert fp_two.cycles < fp_one.cycles / 2 and transaction(two, Op.FP, 64, 2)[0] > compute
    with pytest.raises(ValueError, match="stride must be 1, or 2 for a kernel above 1"):
        CsbLayer(mask=mask, stride=2)


def test_a_one_by_one_kernel_runs_under_k1_and_a_smaller_one_at_the_centre():
    """A 1 x 1 kernel on a 3 x 3 build runs under K1: its transactions cost the kernel-1 build's, its words and
    cycles well below a 3 x 3 kernel's; a 3 x 3 kernel on a 5 x 5 build sits at the centre of its 25 taps and costs
    what a 5 x 5 kernel does (fewer useful MACs)."""
    spec, flat = CsbSpec(kernel=3, out_h=2, out_w=2), CsbSpec(kernel=1, out_h=2, out_w=2)
    mask = np.ones((16, 16), bool)
    one, three = (csb_stages(spec, [CsbLayer(mask=mask, height=4, width=4, kernel=k)], 8) for k in (1, 3))
    kernel_one = csb_stages(flat, [CsbLayer(mask=mask, height=4, width=4, kernel=1)], 8)
    assert [(s.cycles, s.words_in, s.words_out) for s in one[0]] == \
        [(s.cycles, s.words_in, s.words_out) for s in kernel_one[0]]
    assert sum(s.cycles for s in one[0]) < sum(s.cycles for s in three[0]) / 4
    assert 9 * one[1]["macs"] == three[1]["macs"]
    wide = CsbSpec(kernel=5, out_h=2, out_w=2)
    three_on_five, five = (csb_stages(wide, [CsbLayer(mask=mask, height=4, width=4, kernel=k)], 8) for k in (3, 5))
    assert [s.cycles for s in three_on_five[0]] == [s.cycles for s in five[0]]
    assert 25 * three_on_five[1]["macs"] == 9 * five[1]["macs"]


def test_the_resnet_maps_onto_the_csb_pe(trainer, layers):
    """Stem, three blocks (two with 1 x 1 shortcuts, stride 2) and the head, in the order a forward pass calls
    them; the masks are the pruning search's."""
    shapes = [(l.mask.shape, l.height, l.width, l.kernel, l.positions, l.stride) for l in layers]
    assert shapes == [((16, 1), 8, 8, 3, 64, 1), ((16, 16), 8, 8, 3, 64, 1), ((16, 16), 8, 8, 3, 64, 1),
                      ((32, 16), 4, 4, 1, 16, 1), ((32, 16), 8, 8, 3, 16, 2), ((32, 32), 4, 4, 3, 16, 1),
                      ((64, 32), 2, 2, 1, 4, 1), ((64, 32), 4, 4, 3, 4, 2), ((64, 64), 2, 2, 3, 4, 1),
                      ((10, 64), 1, 1, 1, 1, 1)]
    technique = next(t for t in trainer.techniques if t.name == "compress")
    conv1 = trainer.model.blocks[0].conv1.layer_name
    assert np.array_equal(layers[1].mask, technique.masks[conv1].numpy())
    assert sum(int(l.mask.sum()) for l in layers) < sum(l.mask.size for l in layers)  # the search pruned kernels
    assert layers[-1].mask.all()  # the head is never pruned


def test_the_host_share_is_measured_on_the_golden_step(design, trainer, layers):
    host = measure_conv_host(trainer, design.instances[0].spec, layers, repeats=1, samples=2)
    assert host.fixed_s > 0 and host.per_call_s > 0
    with pytest.raises(ValueError, match="fixed-point steps"):
        measure_conv_host(type(trainer)(design.training, progress=False), design.instances[0].spec, layers)


def test_the_explorer_varies_the_output_tile_and_prices_as_the_direct_model(design, layers):
    family = csb_model(design.instances[0].spec, layers, design.training.optim.batch_size, host=HOST)
    assert family.knobs["csb"]["out_h"] == CSB_TILE_KNOBS["out_h"]
    assert family.knobs["csb"]["max_stride"] == (1, 2)  # the network has stride-2 3 x 3 convs
    board = boards()["ultra96v2"]
    space = explore_family(family, board, clock_mhz=100.0,
                           knobs={"csb": {"batch": (8, 16), "out_h": (1, 4), "out_w": (1, 4), "max_stride": (1, 2),
                                          "copies": (1,)}})
    assert space.index.shape[0] == 16
    for index in range(16):
        spec = space.chosen_options(index)[0].spec
        step = csb_step_time(spec, layers, design.training.optim.batch_size, board, clock_mhz=100.0, host=HOST)
        assert space.pe_s[index] == pytest.approx(step.pe_s, rel=1e-12)
        assert space.total_s[index] == pytest.approx(step.total_s, rel=1e-12)
    by = {(o.spec.batch, o.spec.out_h, o.spec.out_w, o.spec.max_stride): i for i, o in enumerate(space.options[0])}
    # a 4 x 4 tile sends the 8 x 8 maps in 4 transactions where a 1 x 1 one needs 64: fewer calls, less host work
    assert space.total_s[by[(16, 4, 4, 1)]] < space.total_s[by[(16, 1, 1, 1)]]
    # the two stride-2 3 x 3 convs at stride 2: a quarter of their tiles
    for batch, out in ((8, 1), (16, 4)):
        assert space.pe_s[by[(batch, out, out, 2)]] < space.pe_s[by[(batch, out, out, 1)]]
    assert block_nnz(layers[1].mask, spec).sum() == layers[1].mask.sum()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("iverilog") is None, reason="Icarus Verilog (iverilog) is not on PATH")
def test_explored_conv_builds_run_on_the_rtl_as_modelled(layers, tmp_path):
    """Three conv builds of the space (1 x 1, 2 x 4 and 4 x 4 tiles; 8 or 16 lanes; 1, 2 or 4 groups): FP, EB, WG
    and UPD on the fullest block of the widest pruned layer through the RTL, every word right, words and cycles
    the model's."""
    pytest.importorskip("cocotb_tools.runner")
    from codesign.pe.csb.format import encode

    rng = np.random.default_rng(0)
    layer = layers[-2]  # the last 3 x 3 conv, 64 x 64 kernels
    for index, spec in enumerate((CsbSpec(kernel=3, batch=8), CsbSpec(kernel=3, out_h=2, out_w=4, batch=8, parallel=2),
                                  CsbSpec(kernel=3, out_h=4, out_w=4, batch=16, parallel=4))):
        codes = rng.integers(-128, 128, (*layer.mask.shape, 3, 3)) * layer.mask[:, :, None, None]
        matrix = encode(codes.astype(np.int8), block_rows=spec.block_rows, block_cols=spec.block_cols)
        check_block_on_rtl(spec, max(matrix.blocks(), key=lambda b: b.nnz), rng, tmp_path / str(index))
