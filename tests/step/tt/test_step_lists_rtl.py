"""A TT layer's whole training step as call lists (codesign.step.tt.step_lists) run on the RTL shell around the
tt1 and tt2 PEs, phase by phase over one arena: the RTL's arena equals the golden shell model's word for word
after every list (so the final arena is the golden run's), and every list's busy cycles (run_start to ap_done)
equal the call-list cycle model's (codesign.step.list_cycles), exactly. The lists hold chains of accumulating
calls (contractions tiled in J), plain calls and 3-D blocks."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest

from codesign.pe import get_pe
from codesign.pe.tt.contract import header_dims
from codesign.shell.calls import ListCase, run_list_golden
from codesign.shell.list_sim import run_list_rtl
from codesign.step.list_cycles import list_cycles
from codesign.step.tt.first_forward import PE1_NAME
from codesign.step.tt.step_lists import LATER
from codesign.train.tt.pe_check import layer_state

sys.path.insert(0, str(Path(__file__).parent))
from test_step_lists import SHAPES, SMALL, batch, lists_step, run_golden, warmed  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("name, stream, order, copies, pairs", [
    ("rank1_b17", 32, "lj", (1, 1), False), ("digits_first_layer_r4_b5", 32, "lj", (1, 1), False),
    ("digits_first_layer_r4_b5", 128, "lj", (1, 1), False), ("rank1_b17", 32, "jl", (1, 1), False),
    ("digits_first_layer_r4_b5", 128, "jl", (1, 1), False), ("digits_first_layer_r4_b5", 128, "jl", (2, 2), False),
    ("digits_first_layer_r4_b5", 128, "jl", (2, 2), True), ("digits_first_layer_r4_b5", 32, "lj", (1, 1), True),
    ("rank1_b17", 32, "jl", (2, 2), False), ("digits_first_layer_r4_b5", 32, "jl", (2, 2), False)])
def test_step_lists_on_the_rtl_equal_golden_and_the_cycle_model(tmp_path, name, stream, order, copies, pairs):
    """``order``: PE1 takes B l outer, or j outer (its core-gradient calls read B in runs of whole l tiles);
    ``copies``: the IPs of each PE a phase's lists are shared among (contractions cut along L between them where
    that ends sooner, :func:`codesign.step.tt.list_tiles.l_cut`), each list run on the RTL in turn; ``pairs``:
    PE1 sums rows j in pairs and PE2 runs row pairs where a call's K fits half the lanes (docs/tt_pe.md). At 32
    bits, on one copy of each or two, ``rank1_b17``'s first forward gives samples to PE1
    (:mod:`codesign.step.tt.first_forward`), beside PE2's; ``digits_first_layer_r4_b5`` at 32 bits on two
    copies cuts its last core's gradient along ``K`` between PE2's copies
    (:func:`codesign.step.tt.list_tiles.k_cut`)."""
    shape = SHAPES[name]
    layer = warmed(shape)
    state = layer_state(layer)
    x, grad_y = batch(layer, shape[3], seed=3)
    small = tuple(dataclasses.replace(spec, stream_bits=stream) for spec in SMALL)
    small = (dataclasses.replace(small[0], b_order=order, j_pairs=pairs),
             dataclasses.replace(small[1], row_pairs=pairs))
    lists, _ = lists_step(state, x, grad_y, small, copies=copies, share_products=1, share_first=True)
    specs = {"tt1": small[0], "tt2": small[1]}
    arena = lists.arena
    runs, chained = [], 0
    for index, phase in enumerate(lists.phases):
        for pe_name, calls in phase:
            pe, spec = get_pe(pe_name), specs[pe_name]
            expected = run_list_golden(pe, spec, arena, calls)
            model = list_cycles(pe, spec, calls, arena)
            result = run_list_rtl(pe, spec, ListCase(calls=calls, arena=arena, expected=expected),
                                  tmp_path / pe_name, pause=0.0)
            runs.append((index, pe_name, len(calls), model.total, result.busy_cycles))
            chained += sum(call.acc_add or call.acc_hold for call in calls)
            assert result.passed, (index, pe_name, result.first_mismatches)
            assert result.words > arena.size  # the whole arena, and guard words around it
            assert model.total == result.busy_cycles, (index, pe_name, model.breakdown())
            arena = expected  # the RTL's arena, word for word
    print(f"\n[step lists on the RTL] {name} at {stream} bits, B {order}, copies {copies}, pairs {pairs}: "
          f"{len(runs)} lists, "
          f"{sum(r[2] for r in runs)} calls "
          f"({chained} accumulating), busy cycles {sum(r[4] for r in runs)}, model {sum(r[3] for r in runs)}: {runs}")
    assert np.array_equal(arena, run_golden(lists, small))
    assert chained > 0 and {r[1] for r in runs} == {"tt1", "tt2"}
    assert (PE1_NAME in lists.contractions) == ((name, stream) == ("rank1_b17", 32))
    # on two copies, a layer of four cores cuts its last two forwards at a sample (one's part beside the other's)
    assert (f"forward last{LATER}" in lists.contractions) == (copies == (2, 2) and len(lists.cores) > 2)
    last, calls = lists.contractions[f"core gradient {len(lists.cores) - 1}"]
    halves = {header_dims(call.header, 4)[0][2] for call in calls} == {last.dims[2] // 2}
    assert halves == ((name, stream, copies) == ("digits_first_layer_r4_b5", 32, (2, 2)))
