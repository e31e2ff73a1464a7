"""A TT layer's whole training step as call lists (codesign.step.tt.step_lists), run on the golden shell model,
against the per-call PE step under the tracked scale rule, bit for bit: output, input gradient, core and bias
gradients, trackers and running means."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from codesign.numerics.scales import UNSET
from codesign.pe import get_pe
from codesign.pe.tt.contract import header_dims, pack_rows
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec
from codesign.shell.calls import run_list_golden
from codesign.step.tt.rounding import frac_of_values, quantize_values
from codesign.step.tt.scale_book import ScaleBook
from codesign.step.tt.step import GoldenRunner, checked_values, compare_steps, pe_step
from codesign.step.tt.list_finish import finish
from codesign.contracts.calls import encode_list
from codesign.step.tt.list_tiles import copies_work, k_cut, l_cut
from codesign.step.tt.list_layout import flat_cores
from codesign.step.tt.step_lists import LATER, Fracs, check_specs, list_products, reshift, step_lists
from codesign.train.tt.layer import TTLinear
from codesign.train.tt.pe_check import layer_state
from codesign.train.tt.precision import TTPrecision

SIXTEEN = dict(a_bits=16, b_bits=16)
SMALL = (Tt1Spec(lanes=4, rows=3, max_j=5, max_k=8, max_l=7, **SIXTEEN),
         Tt2Spec(lanes=4, rows=3, max_j=8, max_k=12, max_l=6, **SIXTEEN))  # every contraction tiled, sums chained
WIDE = (Tt1Spec(lanes=8, **SIXTEEN), Tt2Spec(lanes=8, **SIXTEEN))  # the default buffers, 128-bit chunks
SHAPES = {  # (in_modes, out_modes, max_rank, batch)
    "digits_first_layer_r4_b5": ((2, 4, 4, 2), (4, 4, 4, 4), 4, 5),
    "rank1_b17": ((4, 4), (2, 5), 1, 17),
    "one_core_b3": ((8,), (5,), 1, 3),
    "padding_edges_b33": ((3, 5, 17), (7, 2, 3), (2, 3), 33),
    "square_r3_b16": ((4, 4), (4, 4), 3, 16),
}

REFUSED = {("padding_edges_b33", "small", 128), ("padding_edges_b33", "default", 64),
           ("padding_edges_b33", "default", 128)}


def run_golden(lists, specs) -> np.ndarray:
    """The arena after every phase's lists, on the golden shell model (PE1's and PE2's lists one after the
    other: within a phase they touch disjoint words)."""
    arena = lists.arena
    for phase in lists.phases:
        for pe, calls in phase:
            arena = run_list_golden(get_pe(pe), specs[0] if pe == "tt1" else specs[1], arena, calls)
    return arena


def tracked_layer(shape, *, seed=0, network_input=False):
    in_modes, out_modes, rank, _ = shape
    torch.manual_seed(seed)
    layer = TTLinear(math.prod(in_modes), math.prod(out_modes), in_modes=in_modes, out_modes=out_modes,
                     max_rank=rank, precision=TTPrecision(scale_rule="tracked", scale_momentum=0.5))
    layer.is_network_input = network_input
    return layer


def batch(layer, size, *, seed, extremes=False):
    rng = np.random.default_rng(seed)
    x = np.maximum(rng.normal(size=(size, layer.in_features)), 0).astype(np.float32)
    grad_y = (rng.normal(size=(size, layer.out_features)) * 0.01).astype(np.float32)
    if extremes:
        x[0] = 0.0
        x[-1, 0] = 1e4  # saturates at 8 bits: its input gradient is masked
        grad_y[1] = 0.0
        grad_y[-1, -1] = 50.0  # saturates at 16 bits
    return x, grad_y


def warmed(shape, *, seed=0, network_input=False):
    """A tracked layer after one training pass on the host, so every scale is set (the first step aims them)."""
    layer = tracked_layer(shape, seed=seed, network_input=network_input)
    x, grad_y = batch(layer, shape[3], seed=seed + 10)
    xt = torch.from_numpy(x).requires_grad_(not network_input)
    layer.train()
    layer(xt).backward(torch.from_numpy(grad_y))
    layer.zero_grad(set_to_none=True)
    return layer


def lists_step(state, x, grad_y, specs, **options):
    """The step as the host and the lists take it: the host aims the input's and the output gradient's scales,
    writes the codes, runs the lists, and finishes."""
    d = len(state.cores)
    tr = state.tracker_values()
    assert all(v != UNSET for name in ("act_frac_bits", "grad_frac_bits", "core_grad_frac_bits") for v in tr[name])
    book = ScaleBook(tr, state.mean_values(), rule="tracked", momentum=state.scale_momentum)
    x64, g64 = x.astype(np.float64), grad_y.astype(np.float64)
    act0 = book.host("act_frac_bits", 0, x64, bits=state.activation_bits,
                     headroom_bits=state.activation_headroom_bits, update=True)
    g_frac = book.host("grad_frac_bits", d - 1, g64, bits=state.grad_bits, headroom_bits=state.grad_headroom_bits,
                       update=True)
    core_frac = [frac_of_values(core.astype(np.float64), bits=state.core_bits, headroom_bits=state.core_headroom_bits,
                                current=tr["core_frac_bits"][k], update=False) for k, core in enumerate(state.cores)]
    cores = [quantize_values(core.astype(np.float64), f, state.core_bits) for core, f in zip(state.cores, core_frac)]
    fracs = Fracs(act=(act0, *tr["act_frac_bits"][1:]), grad=(*tr["grad_frac_bits"][:-1], g_frac),
                  core_grad=tr["core_grad_frac_bits"], core=tuple(core_frac), act_bits=state.activation_bits,
                  grad_bits=state.grad_bits, core_bits=state.core_bits)
    g_codes = quantize_values(g64, g_frac, state.grad_bits)
    lists = step_lists(quantize_values(x64, act0, state.activation_bits), cores, g_codes, fracs, spec1=specs[0],
                       spec2=specs[1], need_grad_x=not state.is_network_input, **options)
    return lists, finish(state, x, g_codes, lists, run_golden(lists, specs), book, fracs)


@pytest.mark.parametrize("order", ["lj", "jl"])
@pytest.mark.parametrize("stream", [32, 64, 128])
@pytest.mark.parametrize("buffers", ["small", "default"])
@pytest.mark.parametrize("name", list(SHAPES))
def test_the_step_as_lists_equals_the_per_call_step(name, buffers, stream, order):
    """Every shape on small and default buffers, at every stream width (the tensors laid out in its words), on a
    PE1 that takes B l outer or j outer (its core-gradient calls then read B in runs of whole l tiles)."""
    shape = SHAPES[name]
    specs = tuple(dataclasses.replace(spec, stream_bits=stream) for spec in (SMALL if buffers == "small" else WIDE))
    specs = (dataclasses.replace(specs[0], b_order=order), specs[1])
    if name == "padding_edges_b33":  # rows of 17 values: whole rows (and chunks) in a call's L and K
        lcm = specs[1].lanes * 17
        specs = (dataclasses.replace(specs[0], max_l=max(17, specs[0].max_l)),
                 dataclasses.replace(specs[1], max_k=max(lcm, specs[1].max_k)))
    layer = warmed(shape)
    state = layer_state(layer)
    x, grad_y = batch(layer, shape[3], seed=3, extremes=name == "padding_edges_b33")
    if (name, buffers, stream) in REFUSED:  # 255 input features: the raw input gradient's rows (of 255, or of 85
        # values cut by K) are not whole stream words, and the lists are refused before anything runs
        with pytest.raises(ValueError, match=f"on {stream}-bit streams: tt2's list: .* not made of whole"):
            lists_step(state, x, grad_y, specs)
        return
    expected = pe_step(state, x, grad_y, GoldenRunner())
    lists, got = lists_step(state, x, grad_y, specs)
    mismatches = compare_steps(expected, got)
    assert sum(mismatches.values()) == 0, mismatches
    assert checked_values(expected) > 0 and any(key.startswith("means.") for key in mismatches)
    chained = sum(call.acc_hold for _, calls in lists.contractions.values() for call in calls)
    planes = sum(block.planes > 1 for _, calls in lists.contractions.values() for call in calls
                 for block in call.segments)
    if buffers == "small" and name != "one_core_b3":
        assert chained > 0 and planes > 0  # the buffers force chains of sums and transposed reads
    if name != "one_core_b3":  # core gradient 0 on PE1: B is the saved state, its rows contiguous along l
        whole = 0
        item, calls = lists.contractions["core gradient 0"]
        for call in calls:
            (_, j, k, l), _ = header_dims(call.header, 4)
            runs = call.segments[0].rows * call.segments[0].planes  # rows back to back are one run
            assert runs <= (j if order == "jl" and k == item.dims[2] else j * l)
            whole += order == "jl" and k == item.dims[2] and l > 1
        if order == "jl" and name in ("rank1_b17", "square_r3_b16"):  # their K fits one call on either buffers
            assert whole > 0


@pytest.mark.parametrize("bias_scale, hand_off, fast", [(1e-7, "exact", None), (1e-7, "float32", True),
                                                      (1e-13, "float32", False)])
def test_values_past_float32s_bits_leave_the_list_step_as_the_per_call_step_gives_them(bias_scale, hand_off, fast,
                                                                                        monkeypatch):
    """Biases far finer than the activations (outputs of more than 24 bits) and an output gradient whose codes sum
    over 1,024 terms (input gradients of more than 24 bits), on small buffers and the default ones: the list
    step's output and input gradient, bit for bit the per-call step's, exact or through float32 (its output from
    float32 sums where that is the float64 expression's one rounding, through float64 where the bias's fraction
    is too fine for that)."""
    import codesign.step.tt.list_finish as list_finish

    torch.manual_seed(0)
    layer = TTLinear(8, 1024, in_modes=(8,), out_modes=(1024,), max_rank=1, precision=TTPrecision(
        scale_rule="tracked", scale_momentum=0.5, grad_headroom_bits=0, hand_off=hand_off))
    rng = np.random.default_rng(4)
    with torch.no_grad():
        layer.cores[0].copy_(torch.from_numpy(rng.uniform(0.05, 0.15, layer.cores[0].shape).astype(np.float32)))
        layer.bias.copy_(torch.from_numpy(rng.uniform(-bias_scale, bias_scale, 1024).astype(np.float32)))
    x, grad_y = rng.uniform(0.0, 1.0, (6, 8)).astype(np.float32), rng.uniform(0.5, 1.5, (6, 1024)).astype(np.float32)
    y = layer(torch.from_numpy(x).requires_grad_())  # a pass that aims every scale
    y.backward(torch.from_numpy(grad_y).to(y.dtype))
    state = layer_state(layer)
    taken = []
    real = list_finish.biased_float32
    monkeypatch.setattr(list_finish, "biased_float32", lambda *args: taken.append(real(*args)) or taken[-1])
    expected = pe_step(state, x, grad_y, GoldenRunner())
    for specs in (SMALL, WIDE):
        _, got = lists_step(state, x, grad_y, specs)
        assert sum(compare_steps(expected, got).values()) == 0
    if hand_off == "exact":
        assert not taken and got.y.dtype == got.grad_x.dtype == np.float64
        assert np.count_nonzero(got.y.astype(np.float32) != got.y) > 1000
        assert np.count_nonzero(got.grad_x.astype(np.float32) != got.grad_x) > 5
    else:
        assert len(taken) == 2 and all((result is not None) == fast for result in taken)


@pytest.mark.parametrize("stream", [32, 128])
@pytest.mark.parametrize("buffers", ["small", "default"])
@pytest.mark.parametrize("name", [name for name in SHAPES if name != "padding_edges_b33"])
def test_builds_with_pairs_run_the_step_of_the_per_call_step(name, buffers, stream):
    """PE1 summing rows j in pairs and PE2 running row pairs (docs/tt_pe.md): the calls whose K fits half the
    lanes run in pairs, and every word equals the per-call step's. The lists are built for these builds (where
    copies share a contraction, its cut is priced on their cycles), and the golden shell answers PE1's calls in
    the pairs' order of additions; a list's sums never saturate, so that order moves none."""
    shape = SHAPES[name]
    specs = tuple(dataclasses.replace(spec, stream_bits=stream) for spec in (SMALL if buffers == "small" else WIDE))
    specs = (dataclasses.replace(specs[0], j_pairs=True), dataclasses.replace(specs[1], row_pairs=True))
    layer = warmed(shape)
    state = layer_state(layer)
    x, grad_y = batch(layer, shape[3], seed=3)
    expected = pe_step(state, x, grad_y, GoldenRunner())
    lists, got = lists_step(state, x, grad_y, specs)
    mismatches = compare_steps(expected, got)
    assert sum(mismatches.values()) == 0, mismatches
    paired = {pe: sum(spec.pairs(k) if pe == "tt1" else spec.group_rows(k) > spec.rows
                      for phase in lists.phases for name_, calls in phase if name_ == pe for call in calls
                      for k in [header_dims(call.header, 4)[0][2]])
              for pe, spec in zip(("tt1", "tt2"), specs)}
    # pairs wherever a K fits half the lanes: on SMALL's 4 lanes only the digits layer has K <= 2, on WIDE's 8
    # lanes every shape but one_core_b3 has K <= 4
    if name == "digits_first_layer_r4_b5" or (buffers == "default" and name != "one_core_b3"):
        assert paired["tt1"] > 0 and paired["tt2"] > 0, paired


@pytest.mark.parametrize("stream", [32, 128])
@pytest.mark.parametrize("buffers", ["small", "default"])
@pytest.mark.parametrize("name", [name for name in SHAPES if name != "padding_edges_b33"])
def test_copies_sharing_a_contraction_along_l_equal_the_per_call_step(name, buffers, stream):
    """On two IPs of each PE, a contraction whose copies end sooner with its ``L`` cut between them than its ``I``
    (:func:`l_cut`: a PE1 call loads its ``B``, ``L`` rows, before it computes) is cut so; its results are the
    same bits, and a core gradient's code rows are short enough for its copies to write a part of each."""
    specs = tuple(dataclasses.replace(spec, stream_bits=stream) for spec in (SMALL if buffers == "small" else WIDE))
    specs = (dataclasses.replace(specs[0], b_order="jl"), specs[1])
    layer = warmed(SHAPES[name])
    state = layer_state(layer)
    x, grad_y = batch(layer, SHAPES[name][3], seed=4, extremes=True)
    expected = pe_step(state, x, grad_y, GoldenRunner())
    lists, got = lists_step(state, x, grad_y, specs, copies=(2, 2), share_products=1)
    mismatches = compare_steps(expected, got)
    assert sum(mismatches.values()) == 0, mismatches
    cut = set()
    for item, calls in lists.contractions.values():
        tiles = {header_dims(call.header, 4)[0][3] for call in calls}
        spec = specs[item.pe == "tt2"]
        if l_cut(item, spec, 2) and not k_cut(item, spec, 2):
            assert max(tiles) < item.dims[3], item.name  # every call a part of L
            cut.add(item.pe)
    assert "tt1" in cut or name != "digits_first_layer_r4_b5"  # its core gradients: (m, c) = 16 rows


def test_forwards_in_one_phase_run_as_one_list_and_equal_the_per_call_step():
    """A layer of four cores whose forward contractions each fall short of ``share_products`` runs them in one phase,
    in one list on one IP (each reads what the one before wrote): even where all of them together would fill two
    lists, they are not shared between copies, whose lists run side by side and would race; its results are the
    per-call step's, bit for bit."""
    name = "digits_first_layer_r4_b5"
    layer = warmed(SHAPES[name])
    state = layer_state(layer)
    x, grad_y = batch(layer, SHAPES[name][3], seed=5, extremes=True)
    whole, _ = lists_step(state, x, grad_y, WIDE, copies=(2, 2), share_products=1 << 40)
    forwards = [list_products(whole.contractions[f"forward {k}"][1]) for k in range(3)]
    least = max(forwards) + 1  # no forward alone is shared, all three would fill two lists
    assert 2 * least <= sum(forwards), forwards
    lists, got = lists_step(state, x, grad_y, WIDE, copies=(2, 2), share_products=least)
    assert [pe for pe, _ in lists.phases[0]] == ["tt2"] and lists.forward_phases == 2
    mismatches = compare_steps(pe_step(state, x, grad_y, GoldenRunner()), got)
    assert sum(mismatches.values()) == 0, mismatches


@pytest.mark.parametrize("name, stream", [("digits_first_layer_r4_b5", 32), ("digits_first_layer_r4_b5", 128),
                                          ("square_r3_b16", 32)])
def test_the_last_two_forwards_cut_at_a_sample_overlap_and_equal_the_per_call_step(name, stream):
    """Where the forwards run a phase each on two copies, the last PE2 forward and PE1's last forward are each cut at
    one sample (of five), PE1's first part beside PE2's later one: one phase more, the same calls' products, the
    per-call step's bits. A layer of two cores (its one PE2 forward is the first, which may give PE1 samples of its
    own) and a last forward short of ``share_products`` keep one phase each."""
    specs = tuple(dataclasses.replace(spec, stream_bits=stream) for spec in SMALL)
    layer = warmed(SHAPES[name])
    state = layer_state(layer)
    x, grad_y = batch(layer, SHAPES[name][3], seed=6, extremes=True)
    lists, got = lists_step(state, x, grad_y, specs, copies=(2, 2), share_products=1)
    whole, _ = lists_step(state, x, grad_y, specs, copies=(2, 2), share_products=1 << 40)  # nothing shared or cut
    d, samples = len(lists.cores), SHAPES[name][3]
    assert f"forward last{LATER}" not in whole.contractions
    mismatches = compare_steps(pe_step(state, x, grad_y, GoldenRunner()), got)
    assert sum(mismatches.values()) == 0, mismatches
    if d < 3:
        assert f"forward last{LATER}" not in lists.contractions and lists.forward_phases == d
        return
    named = {id(call): item for item, (_, calls) in lists.contractions.items() for call in calls}
    phases = [{named[id(call)] for _, calls in phase for call in calls} for phase in lists.phases]
    before = f"forward {d - 2}"
    assert phases[d - 2:d + 1] == [{before}, {"forward last", before + LATER}, {f"forward last{LATER}"}]
    assert lists.forward_phases == d + 1  # the forwards before a phase each, the three above
    assert 0 < lists.early_samples < samples
    for n in (before, "forward last"):
        rows = whole.contractions[n][0].dims[0]
        assert [lists.contractions[part][0].dims[0] for part in (n, n + LATER)] == [
            rows // samples * lists.early_samples, rows - rows // samples * lists.early_samples]
        parts = list_products(lists.contractions[n][1]) + list_products(lists.contractions[n + LATER][1])
        assert parts == list_products(whole.contractions[n][1])


def test_the_last_cores_gradient_of_one_row_is_cut_along_l_between_two_copies():
    """The last core's gradient (PE2) has one ``I`` row: cut along ``I`` one copy would take it all while the
    other idles, cut along ``L`` each copy reads all of ``A``, more words in all (which :func:`l_cut` refuses
    where ``I`` can be shared). Where ``I`` leaves a copy idle it cuts ``L`` all the same, as the busiest copy
    ends sooner even were both copies' words to pass one port: every call takes a part of ``L``, both PE2
    lists of the phase take a part, and the step equals the per-call step bit for bit."""
    name = "digits_first_layer_r4_b5"
    specs = tuple(dataclasses.replace(spec, stream_bits=128) for spec in SMALL)
    specs = (dataclasses.replace(specs[0], b_order="jl"), specs[1])
    layer = warmed(SHAPES[name])
    state = layer_state(layer)
    x, grad_y = batch(layer, SHAPES[name][3], seed=3)
    lists, got = lists_step(state, x, grad_y, specs, copies=(2, 2), share_products=1)
    assert sum(compare_steps(pe_step(state, x, grad_y, GoldenRunner()), got).values()) == 0
    d = len(lists.cores)
    item, calls = lists.contractions[f"core gradient {d - 1}"]
    assert item.pe == "tt2" and item.dims[0] == 1 and l_cut(item, specs[1], 2)
    (_, l_words), (_, i_words) = (copies_work(item, specs[1], 2, cut_l=cut) for cut in (True, False))
    assert l_words > i_words  # what the rule for a shared I refuses
    assert max(header_dims(call.header, 4)[0][3] for call in calls) < item.dims[3]
    ids = {id(call) for call in calls}
    assert sum(any(id(call) in ids for call in part) for phase in lists.phases for pe, part in phase
               if pe == "tt2") == 2


@pytest.mark.parametrize("stream", [32, 64])
def test_the_last_cores_gradient_of_one_row_is_cut_along_k_where_that_ends_sooner(stream):
    """The last core's gradient has one ``I`` row: cut along ``L`` each PE2 copy would read all of ``A`` and fill
    part of its rows; cut along ``K`` (:func:`k_cut`, PE2 passes ``K`` through) each reads half of every ``A``
    row and computes every ``L`` row, its code rows short enough for a copy to write its part of each. On the
    small buffers (4 lanes: ``K`` = 8 is two chunks) that ends sooner with fewer words; both PE2 lists of the
    phase take a part, and the step equals the per-call step bit for bit."""
    name = "digits_first_layer_r4_b5"
    specs = tuple(dataclasses.replace(spec, stream_bits=stream) for spec in SMALL)
    layer = warmed(SHAPES[name])
    state = layer_state(layer)
    x, grad_y = batch(layer, SHAPES[name][3], seed=3, extremes=True)
    lists, got = lists_step(state, x, grad_y, specs, copies=(2, 2), share_products=1)
    assert sum(compare_steps(pe_step(state, x, grad_y, GoldenRunner()), got).values()) == 0
    item, calls = lists.contractions[f"core gradient {len(lists.cores) - 1}"]
    assert item.pe == "tt2" and item.dims[0] == 1 and k_cut(item, specs[1], 2)
    (k_cycles, k_words), (l_cycles, l_words) = (copies_work(item, specs[1], 2, cut_l=not along_k, cut_k=along_k)
                                                for along_k in (True, False))
    assert k_cycles < l_cycles and k_words < l_words
    assert {header_dims(call.header, 4)[0][2] for call in calls} == {item.dims[2] // 2}  # each call half of K
    assert {header_dims(call.header, 4)[0][3] for call in calls} == {item.dims[3]}  # and all of L
    assert lists.codes[f"core_grad {len(lists.cores) - 1}"][1].row_values <= item.dims[2] // 2
    ids = {id(call) for call in calls}
    assert sum(any(id(call) in ids for call in part) for phase in lists.phases for pe, part in phase
               if pe == "tt2") == 2


def test_a_contraction_of_raw_results_is_not_cut_along_k():
    """A one-sample batch's first-core input gradient has one ``I`` row and raw results: cut along ``K`` its out
    blocks would not be whole stream words, so it is not (and the lists build)."""
    cores = [np.zeros(shape, np.int64) for shape in [(1, 2, 4, 2), (2, 3, 17, 1)]]
    fracs = Fracs(act=(5, 4), grad=(9, 8), core_grad=(6, 6), core=(2, 2), act_bits=8, grad_bits=16, core_bits=4)
    specs = tuple(dataclasses.replace(spec, stream_bits=128) for spec in WIDE)
    lists = step_lists(np.zeros((1, 68), np.int64), cores, np.zeros((1, 6), np.int64), fracs, spec1=specs[0],
                       spec2=specs[1], copies=(1, 2), share_products=1)
    item, _ = lists.contractions["input gradient 0"]
    assert item.pe == "tt2" and item.dims[0] == 1 and not item.out.rounding.enable
    assert not k_cut(item, specs[1], 2)


@pytest.mark.parametrize("copies", [(1, 1), (2, 3)])
def test_lists_reshifted_to_new_scales_equal_lists_built_at_them(copies):
    """A tracked scale moves: the lists' rounding shifts are changed in place, descriptor for descriptor what
    step_lists builds at the new scales (a moved scale in every tracker kind, the input's and the cores')."""
    shape = SHAPES["padding_edges_b33"]
    d = len(shape[0])
    cores = [np.zeros(s, np.int64) for s in [(1, 7, 3, 2), (2, 2, 5, 3), (3, 3, 17, 1)]]
    zeros_x, zeros_g = np.zeros((33, 255), np.int64), np.zeros((33, 42), np.int64)
    before = Fracs(act=(5, 4, 3), grad=(9, 8, 7), core_grad=(6, 6, 6), core=(2, 2, 2), act_bits=8, grad_bits=16,
                   core_bits=4)
    after = dataclasses.replace(before, act=(6, 4, 2), grad=(9, 10, 7), core_grad=(6, 3, 7), core=(2, 1, 2))
    specs = dict(spec1=dataclasses.replace(SMALL[0], max_l=17), spec2=dataclasses.replace(SMALL[1], max_k=68))
    built = step_lists(zeros_x, cores, zeros_g, before, **specs, copies=copies, share_products=1)
    built.read_ranges(forward=False)  # worked out before the move: what reshift carries over must still hold
    moved, fresh = reshift(built, after), step_lists(zeros_x, cores, zeros_g, after, **specs, copies=copies,
                                                     share_products=1)
    assert reshift(built, before) is built and moved.fracs == after and d == 3
    changed = 0
    for mine, theirs, old in zip(moved.phases, fresh.phases, built.phases):
        assert [pe for pe, _ in mine] == [pe for pe, _ in theirs]
        for (_, calls), (_, want), (_, was) in zip(mine, theirs, old):
            assert np.array_equal(encode_list(calls), encode_list(want))
            changed += int(np.count_nonzero(encode_list(calls) != encode_list(was)))
    assert changed > 0 and np.array_equal(moved.arena, fresh.arena)
    for forward in (True, False):
        assert moved.read_ranges(forward=forward) == fresh.read_ranges(forward=forward)
    for mine, theirs in zip(moved.backward_reads, fresh.backward_reads):
        for name in ("cores", "stats", "counts", "grad_x", "ranges", "core_slots", "record_words", "record_starts",
                     "sum_words", "summed", "sum_starts"):
            assert np.array_equal(getattr(mine, name), getattr(theirs, name)), name
    assert len(moved.backward_reads[0].stats) == 3 * d - 2  # d-1 act, d-1 grad, d core
    assert moved.backward_reads is built.backward_reads  # the layout's, carried over
    # the core gradients' scales, kept per layout (shared with the lists reshift made), at each lists' own fractions
    for lists, fracs in ((built, before), (moved, after), (built, before)):
        scales, ends = lists.gradient_scales((0, 2))
        assert ends.tolist() == [0, 42, 42 + 153] and not scales.flags.writeable
        assert scales.tolist() == [2.0 ** -fracs.core_grad[0]] * 42 + [2.0 ** -fracs.core_grad[2]] * 153
    with pytest.raises(ValueError, match="code widths"):
        reshift(built, dataclasses.replace(after, grad_bits=8))


WRITE_CASES = [(name, stream) for name in SHAPES for stream in (32, 64, 128) if (name, "small", stream) not in REFUSED]


def lists_to_write(name: str, stream: int, copies=(1, 1)):
    """Lists of shape ``name`` on the small buffers at ``stream`` bits (zeros: only their layout matters) for
    ``copies`` IPs of each PE, and the shapes of its cores."""
    in_modes, out_modes, _, size = SHAPES[name]
    shapes = [core.shape for core in layer_state(tracked_layer(SHAPES[name])).cores]
    spec1, spec2 = (dataclasses.replace(spec, stream_bits=stream) for spec in SMALL)
    if name == "padding_edges_b33":  # rows of 17 values: whole rows (and chunks) in a call's L and K
        spec1, spec2 = dataclasses.replace(spec1, max_l=17), dataclasses.replace(spec2, max_k=68)
    fracs = Fracs(act=(5,) * len(shapes), grad=(9,) * len(shapes), core_grad=(6,) * len(shapes),
                  core=(2,) * len(shapes), act_bits=8, grad_bits=16, core_bits=4)
    lists = step_lists(np.zeros((size, math.prod(in_modes)), np.int64), [np.zeros(s, np.int64) for s in shapes],
                       np.zeros((size, math.prod(out_modes)), np.int64), fracs, spec1=spec1, spec2=spec2,
                       copies=copies, share_products=1, share_first=True)
    return lists, shapes


def packed_one_by_one(lists, arena: np.ndarray, values_of, stream: int):
    """``arena`` with each input ``values_of(item)`` gives (None: left alone) packed by pack_rows into its rows,
    and the ranges written: what a write must equal."""
    expected, ranges = arena.copy(), []
    for item in lists.inputs.values():
        values = values_of(item)
        if values is not None:
            words = pack_rows(item.layout(values), lists.lanes, 16, stream_bits=stream)
            expected[item.rows.offset // 4:item.rows.offset // 4 + words.size] = words
            ranges.append((item.rows.offset // 4, words.size))
    return expected, ranges


def noise_arena(lists, rng) -> np.ndarray:
    return rng.integers(0, 1 << 32, size=lists.arena.size, dtype=np.uint64).astype(np.uint32)


@pytest.mark.parametrize("name, stream", WRITE_CASES)
def test_every_core_layout_written_in_one_gather_equals_packing_each(name, stream):
    """The host writes every core in every layout a PE reads in one gather (``core_slots``): word for word the
    layouts packed one by one with pack_rows, the padding slots and lanes zeroed over whatever the arena held, no
    word outside them touched; codes over the whole 16-bit slot (the write moves bits, whatever the cores' width),
    and the ranges it reports are the packed ones."""
    lists, shapes = lists_to_write(name, stream)
    rng = np.random.default_rng(3)
    cores = [rng.integers(-1 << 15, 1 << 15, size=s) for s in shapes]
    cores[0].flat[:4] = (-1 << 15, (1 << 15) - 1, -1, 0)
    arena = noise_arena(lists, rng)
    expected, ranges = packed_one_by_one(
        lists, arena, lambda item: cores[item.source] if isinstance(item.source, int) else None, stream)
    assert len(ranges) >= len(shapes)
    assert sorted(lists.write(arena, core_codes=flat_cores(cores))) == sorted(ranges)
    assert np.array_equal(arena, expected)
    with pytest.raises(ValueError, match="core codes for cores"):
        lists.write(arena, core_codes=flat_cores(cores)[1:])


def _cores_named(name: str, d: int) -> set:
    """The cores a contraction's calls read, by its name: a forward or input gradient reads its own core, the last
    forward the last; a core gradient none."""
    name = name.removesuffix(LATER)  # a part of a contraction reads its core
    if name.startswith("core gradient"):
        return set()
    if name == "forward last":
        return {d - 1}
    return {int(name.split()[-1] if not name.endswith("on PE1") else 0)}


@pytest.mark.parametrize("copies", [(1, 1), (2, 2)])
@pytest.mark.parametrize("name", list(SHAPES))
def test_the_cores_a_phase_reads_are_those_its_contractions_take(name, copies):
    """``cores_read_in(phase)``, which the host writes before that phase starts (the others beside it), names the
    cores of the contractions whose calls the phase runs, and no other."""
    lists, shapes = lists_to_write(name, 32, copies)
    named = {id(call): item_name for item_name, (_, calls) in lists.contractions.items() for call in calls}
    for phase, listed in enumerate(lists.phases):
        names = {named[id(call)] for _, calls in listed for call in calls}
        expected = set().union(*(_cores_named(item_name, len(shapes)) for item_name in names))
        assert set(lists.cores_read_in(phase)) == expected, (phase, names)


@pytest.mark.parametrize("copies", [(1, 1), (2, 2)])
@pytest.mark.parametrize("name, stream", WRITE_CASES)
def test_the_input_and_output_gradient_written_slot_by_slot_equal_packing_them(name, stream, copies):
    """The host writes the input codes and the output-gradient codes (rows and transposed) straight into their
    16-bit slots: word for word what pack_rows makes of each layout, the padding lanes and a chunk's unused slots
    zeroed over whatever the arena held, no other word touched; narrow codes (int8) and 16-bit extremes alike.
    PE1 takes some samples of the first forward where that is sooner (rank1_b17 at 32 bits, on one copy of each
    PE or two): their input transposed too (``x_t``). The input twice: as the forward reads it, and the first
    core's gradient (``x_cg``)."""
    lists, _ = lists_to_write(name, stream, copies)
    in_modes, out_modes, _, size = SHAPES[name]
    rng = np.random.default_rng(4)
    given = {"x": rng.integers(-128, 128, size=(size, math.prod(in_modes))).astype(np.int8),
             "gy": rng.integers(-1 << 15, 1 << 15, size=(size, math.prod(out_modes))).astype(np.int16)}
    given["gy"].flat[:3] = (-1 << 15, (1 << 15) - 1, -1)
    given["x_t"] = given["x_cg"] = given["x"]
    arena = noise_arena(lists, rng)
    expected, ranges = packed_one_by_one(
        lists, arena, lambda item: given[item.source].astype(np.int64) if isinstance(item.source, str) else None,
        stream)
    shared = "x transposed" in lists.inputs
    assert len(ranges) == 4 + shared  # x, its copy for the core gradient, gy, gy transposed (and x transposed)
    single = (name, stream) == ("rank1_b17", 32)  # the one case PE1 takes a share on one copy of each PE
    assert shared >= single and shared <= (single or copies == (2, 2))
    assert sorted(lists.write(arena, **given)) == sorted(ranges)
    assert np.array_equal(arena, expected)


def test_narrow_accumulators_cut_every_sum_so_that_no_call_saturates():
    """26-bit accumulators: a core-gradient call may sum only 7 products of 16-bit gradients and 8-bit states
    whatever the codes, so the lists chain short calls; with saturating codes the step still equals the
    per-call step (whose schedule keeps the same bound)."""
    narrow = tuple(dataclasses.replace(spec, acc_bits=26) for spec in SMALL)
    shape = SHAPES["square_r3_b16"]
    layer = warmed(shape)
    state = layer_state(layer)
    x, grad_y = batch(layer, shape[3], seed=7, extremes=True)
    expected = pe_step(state, x, grad_y, GoldenRunner())
    lists, got = lists_step(state, x, grad_y, narrow)
    assert sum(compare_steps(expected, got).values()) == 0
    _, calls = lists.contractions["core gradient 0"]
    assert max(((call.header >> 8) & 255) * ((call.header >> 16) & 255) for call in calls) <= 7


def test_a_network_input_takes_no_input_gradient():
    shape = SHAPES["square_r3_b16"]
    layer = warmed(shape, network_input=True)
    state = layer_state(layer)
    x, grad_y = batch(layer, shape[3], seed=4)
    lists, got = lists_step(state, x, grad_y, SMALL)
    assert got.grad_x is None and "grad_x" not in lists.outputs
    assert sum(compare_steps(pe_step(state, x, grad_y, GoldenRunner()), got).values()) == 0


def test_the_input_gradient_needs_the_input_or_where_it_lay_within_its_bounds(monkeypatch):
    """finish masks the input gradient where the input saturated: given neither the input nor that mask, it says
    so instead of failing somewhere inside."""
    shape = SHAPES["square_r3_b16"]
    layer = warmed(shape)
    x, grad_y = batch(layer, shape[3], seed=6)
    real = finish
    monkeypatch.setitem(globals(), "finish", lambda state, x, *args: real(state, None, *args))
    with pytest.raises(ValueError, match="needs the input x, or where it lay within its codes' bounds"):
        lists_step(layer_state(layer), x, grad_y, SMALL)


def test_a_wrong_pe_word_is_caught(monkeypatch):
    """The comparison can fail: one bit flipped in a state the forward list wrote changes the step."""
    shape = SHAPES["rank1_b17"]
    layer = warmed(shape)
    state = layer_state(layer)
    x, grad_y = batch(layer, shape[3], seed=5)
    expected = pe_step(state, x, grad_y, GoldenRunner())
    real = run_list_golden
    hit = []

    def flipping(pe, spec, arena, calls):
        out = real(pe, spec, arena, calls)
        if not hit:  # the first list is the forward on PE2: its first out word is a state the later calls read
            word = calls[0].out.offset // 4
            out[word] ^= np.uint32(1 << 3)
            hit.append(word)
        return out

    monkeypatch.setitem(globals(), "run_list_golden", flipping)
    _, got = lists_step(state, x, grad_y, SMALL)
    mismatches = compare_steps(expected, got)
    assert hit and mismatches["y"] > 0 and mismatches["core_grad[1]"] > 0  # S_1 feeds y and core 1's gradient


def test_specs_the_lists_cannot_use_are_refused():
    with pytest.raises(ValueError, match="16-bit A and B"):
        check_specs(Tt1Spec(), Tt2Spec(**SIXTEEN))
    with pytest.raises(ValueError, match="lanes and stream widths must agree"):
        check_specs(Tt1Spec(lanes=8, **SIXTEEN), Tt2Spec(lanes=4, **SIXTEEN))
    with pytest.raises(ValueError, match="stream_bits 64 and 128"):
        check_specs(Tt1Spec(stream_bits=64, **SIXTEEN), Tt2Spec(stream_bits=128, **SIXTEEN))
    layer = warmed(SHAPES["padding_edges_b33"])
    state = layer_state(layer)
    x, grad_y = batch(layer, 33, seed=6)
    with pytest.raises(ValueError, match="forward 0: K: tiles of 68 exceed the limit 12"):
        lists_step(state, x, grad_y, SMALL)
    with pytest.raises(ValueError, match="at most 128 bits"):
        check_specs(Tt1Spec(**SIXTEEN), Tt2Spec(**SIXTEEN))  # 16 lanes of 16 bits
