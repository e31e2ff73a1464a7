"""The CSB conv family on the desktop: a 'convnet' configuration's set-up (the image, the convs, the compressed
fields), what it refuses before anything runs, and the explorer's space of conv-list builds: square blocks and
tiles only, on one IP or two, each point priced as the list cycle model prices that build's step."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from codesign.boards import board
from codesign.design import load_design
from codesign.design.explore_model import explore_family
from codesign.design.families import family_of, untrainable
from codesign.design.families import shared_build
from codesign.design.families.csb_conv import (conv_list_model, csb_conv_explorer, csb_conv_setup,
                                               csb_conv_setup_of, runs_conv_lists)
from codesign.loops.common import HwTrainError
from codesign.loops.host_share import THIS_MACHINE
from codesign.step.csb.conv_list_time import conv_list_step
from codesign.step.csb.conv_net import net_shapes
from codesign.step.host import HostModel
from codesign.step.list_cycles import BOARD_DDR

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
SMALL = Path(__file__).resolve().parents[1] / "fixtures" / "small_conv.toml"
HOST = HostModel(fixed_s=2e-4, per_call_s=0.0, source="test")
KNOBS = {"block_rows": (4, 8), "block_cols": (4, 8), "batch": (4, 6, 8), "parallel": (1, 2), "out_h": (2,),
         "out_w": (2, 4), "copies": (1, 2)}


def small(tmp_path, lanes: int = 8):
    """The small conv design (tests/design/fixtures/small_conv.toml) with ``lanes`` lanes."""
    path = tmp_path / f"small_conv_{lanes}.toml"
    path.write_text(SMALL.read_text().replace("batch = 8", f"batch = {lanes}"))
    return load_design(path)


def test_the_set_up_reads_the_image_the_convs_and_the_compressed_fields():
    design = load_design(EXAMPLES / "digits_compressed_conv.toml")
    setup = csb_conv_setup_of(design)
    assert family_of(design).key == "csb_conv" and untrainable(design) is None
    assert (setup.image, setup.convs, setup.classes) == ((1, 8, 8), ((16, 1), (16, 1), (32, 2), (32, 1)), 10)
    assert (setup.spec.kernel, setup.spec.max_stride, setup.spec.batch, setup.spec.parallel) == (3, 2, 16, 2)
    assert setup.spec.stream_bits == 128 and shared_build(design, "csb")[1] == 2  # two IPs share each step
    assert (setup.batch_size, setup.warmup_epochs, setup.lr, setup.schedule) == (64, 3, 0.1, "constant")
    assert csb_conv_setup_of(design, epochs=4).epochs == 4


def test_what_the_family_refuses_before_anything_runs(tmp_path):
    design = small(tmp_path)
    training = design.training
    with pytest.raises(HwTrainError, match="trains model 'convnet', not 'mlp'"):
        csb_conv_setup(training.replace(model=dataclasses.replace(training.model, name="mlp")))
    with pytest.raises(HwTrainError, match="UPD.*plain SGD"):
        csb_conv_setup(training.replace(optim=dataclasses.replace(training.optim, momentum=0.9)))
    with pytest.raises(HwTrainError, match="not from changes"):
        csb_conv_setup_of(design, spec=design.instances[0].spec)
    odd = small(tmp_path, lanes=6)
    with pytest.raises(HwTrainError, match="6 lanes on a 32-bit stream: the conv lists need a multiple of 4"):
        csb_conv_setup_of(odd)
    assert "multiple of 4" in untrainable(odd)


def kept(setup, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    shapes = net_shapes(setup.spec, setup.image, setup.convs, setup.classes)
    return [rng.random((s.outputs, s.channels)) < 0.7 for s in shapes[:-1]] + [
        np.ones((setup.classes, shapes[-1].channels), bool)]


def test_the_space_holds_square_list_builds_each_priced_as_its_step(tmp_path):
    setup = csb_conv_setup_of(small(tmp_path))
    masks = kept(setup)
    model = conv_list_model(setup, masks, host=HOST)
    space = explore_family(model, board("ultra96v2"), clock_mhz=100.0, knobs={"csb": KNOBS})
    specs = [option.spec for option in space.options[0]]
    assert {(s.block_rows, s.block_cols, s.batch, s.out_h, s.out_w) for s in specs} == {
        (b, b, lanes, 2, 2) for b in (4, 8) for lanes in (4, 8)}  # 6 lanes, non-square blocks or tiles: refused
    assert not runs_conv_lists(setup, dataclasses.replace(setup.spec, out_h=2))
    checked = set()
    for index in range(space.index.shape[0]):
        option = space.chosen_options(index)[0]
        spec, copies = option.spec, option.copies
        if (spec.block_rows, spec.batch, spec.parallel, copies) not in ((4, 4, 2, 1), (8, 8, 1, 1), (8, 8, 2, 2)):
            continue  # three builds, two of them re-priced from another's simulation: each cycle model run takes s
        step = conv_list_step(spec, setup.image, setup.convs, setup.classes, setup.batch_size, masks,
                              board("ultra96v2"), clock_mhz=100.0, host_s=HOST.fixed_s, host_source="test",
                              ddr=BOARD_DDR, copies=copies)  # the cycle model itself, not the fast re-pricing
        assert space.pe_s[index] + space.memory_s[index] == pytest.approx(step.pe_s + step.memory_s, rel=1e-12)
        assert space.host_s[index] == HOST.fixed_s
        checked.add(copies)
    assert checked == {1, 2}
    one, two = ({o.copies: o for o in space.options[0] if (o.spec.block_rows, o.spec.batch, o.spec.parallel,
                                                             o.spec.out_w) == (8, 8, 2, 2)}[c] for c in (1, 2))
    assert two.resources["dsp"] == 2 * one.resources["dsp"] and two.cycles.sum() < one.cycles.sum()


def test_wide_streams_run_where_a_position_s_codes_fill_whole_beats(tmp_path):
    """4 lanes run on 32 bits only, 8 on 32 or 64, 16 on any width; a 64-bit build is priced as the cycle model
    prices its step, and moves its operands in fewer cycles than its 32-bit twin."""
    setup = csb_conv_setup_of(small(tmp_path))
    runs = {(lanes, bits) for lanes in (4, 8, 16) for bits in (32, 64, 128)
            if runs_conv_lists(setup, dataclasses.replace(setup.spec, batch=lanes, stream_bits=bits))}
    assert runs == {(4, 32), (8, 32), (8, 64), (16, 32), (16, 64), (16, 128)}
    masks = kept(setup)
    knobs = {**KNOBS, "block_rows": (8,), "block_cols": (8,), "batch": (8,), "parallel": (1,), "out_w": (2,),
             "copies": (1,), "stream_bits": (32, 64, 128)}
    space = explore_family(conv_list_model(setup, masks, host=HOST), board("ultra96v2"), clock_mhz=100.0,
                           knobs={"csb": knobs})
    pe_s = {}
    for index in range(space.index.shape[0]):
        spec = space.chosen_options(index)[0].spec
        step = conv_list_step(spec, setup.image, setup.convs, setup.classes, setup.batch_size, masks,
                              board("ultra96v2"), clock_mhz=100.0, host_s=HOST.fixed_s, host_source="test",
                              ddr=BOARD_DDR)
        assert space.pe_s[index] + space.memory_s[index] == pytest.approx(step.pe_s + step.memory_s, rel=1e-12)
        pe_s[spec.stream_bits] = space.pe_s[index] + space.memory_s[index]
    assert sorted(pe_s) == [32, 64] and pe_s[64] < pe_s[32]


def test_copies_past_the_cap_are_not_simulated(tmp_path):
    """The conv lists' pricing simulates a step, so a build's copies that alone pass the cap are never priced: with
    room for two copies under the cap, of one to four copies offered only one and two are in the space."""
    setup = csb_conv_setup_of(small(tmp_path))
    model, target = conv_list_model(setup, kept(setup), host=HOST), board("ultra96v2")
    assert model.simulates
    knobs = {**KNOBS, "block_rows": (8,), "block_cols": (8,), "batch": (8,), "parallel": (1,), "out_w": (2,)}
    one = explore_family(model, target, clock_mhz=100.0, knobs={"csb": knobs}).options[0][0].resources
    cap = 2.5 * max(one[k] / target.resources[k] for k in one)  # two copies fit, three do not
    space = explore_family(model, target, clock_mhz=100.0, cap=cap, knobs={"csb": {**knobs, "copies": (1, 2, 3, 4)}})
    assert sorted(option.copies for option in space.options[0]) == [1, 2]


def test_the_explorer_prunes_as_the_loop_does_and_times_its_host_here(tmp_path):
    model = csb_conv_explorer(small(tmp_path), progress=lambda line: None)
    assert model.name == "csb_conv" and model.host.source == THIS_MACHINE and model.host.fixed_s > 0
    assert 0 < model.macs
