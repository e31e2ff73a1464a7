"""The PE phases of the list cycle model: the FP-MAC array's and the CSB PE's add up to their RTL cycle models, for
block operations (with and without the CSB flags), element-wise operations and refused headers; PE2's loader takes
its words beside the MAC loop and holds the next block's loop until it has them all; PE2's output engine sends a
group's results while the next group computes, and holds the group after until it has."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from codesign.pe import get_pe
from codesign.pe.csb import CsbSpec
from codesign.pe.csb.beats import widen
from codesign.pe.csb.cycles import transaction_cycles as csb_cycles
from codesign.pe.csb.stream import chain_held, transaction_sections
from codesign.pe.csb.stream import EwOp, header_word as csb_header
from codesign.pe.csb.stream import Op as CsbOp
from codesign.pe.fpmac_array.contract import Header
from codesign.pe.fpmac_array.cycles import transaction_cycles
from codesign.pe.fpmac_array.spec import FpmacArraySpec
from codesign.pe.fpmac_array.vector import OP_MASK, OP_RELU, OP_SGD, VectorHeader
from codesign.pe.tt.contract import header_word as tt_header
from codesign.pe.tt.cycles import pe1_cycles, pe2_cycles
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec
from codesign.step.list_pe import (BESIDE, DRAIN, END, GATE, IN, OUT, SYNC, THROUGH, WAIT, Pe, pe_phases,
                                   stall_free_cycles)

SPEC = FpmacArraySpec(max_m=12, max_n=10, max_k=12)


@pytest.mark.parametrize("header", [
    Header(m=12, n=10, k=12, fb=9).word(), Header(m=3, n=1, k=7, fb=23, trans_a=True, accumulate=True).word(),
    VectorHeader(op=OP_RELU, m=4, n=5, fb=7).word(), VectorHeader(op=OP_MASK, m=1, n=10, fb=7).word(),
    VectorHeader(op=OP_SGD, m=12, n=10, fb=23).word(), Header(m=13, n=1, k=1, fb=1).word(),
    VectorHeader(op=5, m=1, n=1, fb=1).word()])
def test_fpmac_array_phases_add_up_to_its_cycle_model(header):
    steps, status, operands, results = pe_phases(get_pe("fpmac_array"), SPEC, header)
    cycles = transaction_cycles(SPEC, header)
    assert sum(n for _, n, _ in steps) == cycles.total
    assert steps[:2] == [(IN, 1, None), (OUT, 1, status)]
    assert (operands, results) == ((cycles.load, cycles.drain) if status == 0 else (0, 0))
    if status == 0:
        assert [kind for kind, _, _ in steps[2:]] == [IN, WAIT, OUT]


CSB = CsbSpec(block_rows=4, block_cols=4, batch=3, acc_bits=16)
CSB_WIDE = CsbSpec(block_rows=4, block_cols=4, batch=4, acc_bits=16, stream_bits=128)


@pytest.mark.parametrize("spec", [CSB, CSB_WIDE], ids=["w32", "w128"])
@pytest.mark.parametrize("header", [
    csb_header(CsbOp.FP, 5), csb_header(CsbOp.FP, 5, zero=True), csb_header(CsbOp.EB, 16, zero=True),
    csb_header(CsbOp.WG, 7, g_first=True), csb_header(CsbOp.WG, 0, zero=True), csb_header(CsbOp.UPD, 3, 9, left=True),
    csb_header(EwOp.SELECT, 12, ew=True), csb_header(EwOp.SHR, 16, 16, ew=True), csb_header(EwOp.RELU, 9, ew=True),
    csb_header(CsbOp.UPD, 1, zero=True),
    csb_header(EwOp.SHR, 17, ew=True)])
def test_csb_phases_add_up_to_its_cycle_model(header, spec):
    """The phases' cycles are the PE's stall-free transaction cycles for the words of that header (valid indices);
    the status is the first word out (an element-wise op's THROUGH phase gives it first); on a 128-bit stream the
    operands count beats and the results go four to a beat."""
    steps, status, operands, results = pe_phases(get_pe("csb"), spec, header)
    parts = spec.parts
    # the 32-bit twin's words (index 0x00, inside the block, and zero data: the cycles see lengths only) as beats
    narrow = pe_phases(get_pe("csb"), dataclasses.replace(spec, stream_bits=32), header)
    words = np.array([header] + [0] * narrow[2], np.uint32)
    if status == 0:
        words = widen(words, transaction_sections(spec, header, chain_held(spec, header)), parts)
        assert words.size == parts * (1 + operands)
    assert stall_free_cycles(steps) == csb_cycles(spec, np.pad(words, (0, -words.size % parts))).total
    assert results == parts * -(-narrow[3] // parts)  # the 32-bit build's results in whole beats
    beats = results // parts
    if steps[-1][0] == THROUGH:  # an element-wise op: the status, then a result a word streamed
        assert steps[-1] == (THROUGH, beats, status) and not any(kind == OUT for kind, _, _ in steps)
    else:
        outs = [(n, s) for kind, n, s in steps if kind == OUT]
        assert outs[0] == (1, status) and sum(n for n, _ in outs[1:]) == beats


def _run(phases, offered, taken=lambda cycle: True) -> int:
    """Cycles a Pe takes through ``phases`` when the stream offers a word in the cycles ``offered(cycle)`` says
    and takes its results in those ``taken(cycle)`` says."""
    pe, cycle = Pe(), 0
    pe.phases.extend(phases)
    pe.advance()
    while pe.kind is not None or pe.side or pe.jobs:
        pe.edge(pe.in_ready and offered(cycle), pe.out_valid and taken(cycle))
        cycle += 1
        assert cycle < 10_000, "the phases never end"
    return cycle


TT_BUILD = dict(lanes=4, rows=2, a_bits=8, b_bits=4, max_j=16, max_k=16, max_l=16)


@pytest.mark.parametrize("bits", [32, 128])
@pytest.mark.parametrize("name", ["tt1", "tt2"])
@pytest.mark.parametrize("dims", [(3, 5, 9, 3), (1, 5, 9, 3), (4, 1, 1, 1), (2, 16, 16, 16), (5, 2, 3, 16)])
def test_pe1_and_pe2_load_the_next_block_beside_the_mac_loop(dims, name, bits):
    """Every block but the first loads between a BESIDE and its SYNC; with every word offered the phases take the
    PE's cycle formula, which overlaps one block's load with the other's MAC loop and results."""
    spec = (Tt1Spec if name == "tt1" else Tt2Spec)(**TT_BUILD, stream_bits=bits)
    header = tt_header(*dims)
    steps, _, operands, _ = pe_phases(get_pe(name), spec, header)
    kinds = [kind for kind, _, _ in steps]
    assert kinds.count(BESIDE) == kinds.count(SYNC) == dims[0] - 1
    cycles = (pe1_cycles if name == "tt1" else pe2_cycles)(spec, header)
    assert (cycles.overlap > 0) == (dims[0] > 1)
    assert _run(steps, lambda cycle: True) == cycles.total
    assert sum(n for kind, n, _ in steps if kind in (IN, BESIDE)) == 1 + operands


def test_an_element_wise_stream_takes_a_word_as_its_register_frees():
    """THROUGH: the status waits in the output register as the phase starts; a word is taken in a cycle the
    register is empty or given, its result given from the next. All taken: ``n + 1`` cycles, each the PE's;
    results taken every other cycle: a word taken only as one is given, twice the cycles, the stalls not the PE's.
    A word moved that the register has no room for, or a word given from an empty one, is the caller's error."""
    def run(n, taken):
        pe, cycle, works, given = Pe(), 0, 0, []
        pe.phases.extend([(THROUGH, n, 0)])
        pe.advance()
        while pe.kind is not None:
            give = pe.out_valid and taken(cycle)
            take = pe.takes(give)
            if give:
                given.append(pe.status)
            works += pe.works(take, give)
            pe.edge(take, give)
            cycle += 1
        return cycle, works, given

    assert run(5, lambda cycle: True) == (6, 6, [0] + [None] * 5)
    assert run(5, lambda cycle: cycle % 2 == 0) == (11, 6, [0] + [None] * 5)
    assert run(1, lambda cycle: cycle > 3) == (6, 2, [0, None])
    pe = Pe()
    pe.phases.extend([(THROUGH, 2, 0)])
    pe.advance()
    assert pe.out_valid and not pe.in_ready and pe.takes(True)
    with pytest.raises(RuntimeError):
        pe.edge(True, False)  # the register still holds the status


def test_a_sync_holds_the_mac_loop_until_the_loader_has_its_words():
    """Two WAIT cycles beside four words: offered every other cycle, the loader needs 8 cycles, and the phase after
    the SYNC starts in the cycle after the last word; with nothing beside, the SYNC takes no cycle."""
    phases = [(BESIDE, 4, None), (WAIT, 2, None), (SYNC, 1, None), (WAIT, 3, None)]
    assert _run(phases, lambda cycle: cycle % 2 == 1) == 8 + 3
    assert _run(phases, lambda cycle: True) == 4 + 3
    assert _run([(WAIT, 2, None), (SYNC, 1, None), (WAIT, 3, None)], lambda cycle: True) == 5


def test_pe2s_output_engine_sends_a_group_beside_the_next_and_holds_the_one_after():
    """Three groups (MAC loops of 3, 1 and 1 cycles), each sent as a RAM read and two words (rtl/tt/tt2_pe.v):
    a group's read two cycles after its last MAC cycle, or the cycle after the group before has left; a group's
    loop once the group two before has left (by hand: group 1 ends at cycle 3, group 0 leaves at 6, so group 2's
    loop is cycle 8, its read 10, its words 11 and 12). Every other cycle taken, group 0 leaves at 7, group 1 is
    read at 8 and leaves at 11, group 2 computes at 9 and leaves at 15."""
    job = ((WAIT, 1, None), (OUT, 2, None))
    phases = [(WAIT, 3, None), (DRAIN, 2, job), (GATE, 1, None), (WAIT, 1, None), (DRAIN, 2, job),
              (GATE, 1, None), (WAIT, 1, None), (DRAIN, 2, job), (END, 1, None)]
    assert _run(phases, lambda cycle: True) == 13
    assert _run(phases, lambda cycle: True, lambda cycle: cycle % 2 == 1) == 16
