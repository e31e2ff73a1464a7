"""The CSB PE's LOSS (element-wise op 3) at the golden level: the grid's stimulus reaches 10^4 codes on every point
built with the LOSS unit and the golden PE answers it as the independent reference does; a build without the unit
refuses LOSS; the encoder refuses bad input before anything is written; the cycle model by hand. The C-sim and
RTL levels run the same stimulus (tests/pe/test_levels.py) and the step's lists with LOSS on the RTL shell
(tests/step/csb/test_list_time.py)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from codesign.numerics.loss_grad import NO_SAMPLE
from codesign.pe.csb import loss
from codesign.pe.csb.beats import widen
from codesign.pe.csb.cycles import transaction_cycles
from codesign.pe.csb.pe import CsbPE
from codesign.pe.csb.spec import CsbSpec
from codesign.pe.csb.stimulus_loss import count_loss, loss_transactions
from codesign.pe.csb.stream import (FLAG_EW, CsbSession, EwOp, encode_loss, header_status, header_word,
                                    transaction_sections)

GRID = CsbPE().verification_grid()


@pytest.mark.parametrize("case", [case for case in GRID if case.spec.loss], ids=lambda case: case.id)
def test_grid_stimulus_reaches_ten_thousand_codes_and_agrees_with_the_reference(case):
    pe, spec = CsbPE(), replace(case.spec, stream_bits=32)  # a wide point's set is this one's as beats
    pairs = loss_transactions(spec, target=10_000, seed=2024)
    assert count_loss(spec, pairs) >= 10_000
    answer = pe.reference_session(spec)
    assert sum(np.asarray(answer(w)).tolist() != o.tolist() for w, o in pairs) == 0
    statuses = [int(o[0]) for _, o in pairs]
    assert statuses.count(3) == 8 and statuses.count(1) + statuses.count(2) == 7  # the refused ones are there


def test_a_build_without_the_unit_refuses_loss():
    spec = CsbSpec(block_rows=4, block_cols=4, batch=4)
    header = header_word(EwOp.LOSS, 2, 8, ew=True)
    assert header_status(spec, header) == 1
    assert CsbSession(spec).answer(np.array([header], np.uint32)).tolist() == [1]
    assert CsbPE().reference_output(spec, [header]).tolist() == [1]
    with pytest.raises(ValueError, match="without the LOSS unit"):
        encode_loss(spec, np.zeros((2, 4)), np.zeros(4, int), exp_shift=8, recip_shift=40, batch=4)


@pytest.mark.parametrize("bad, message", [
    (dict(v=np.zeros((2, 3))), "lanes"), (dict(v=np.zeros((6, 4))), "classes"),
    (dict(labels=np.zeros(3, int)), "labels"), (dict(labels=np.array([0, 1, 2, 0])), "0..1"),
    (dict(recip_shift=49), "recip_shift"), (dict(batch=0), "batch"), (dict(batch=4096), "4095"),
    (dict(exp_shift=32), "exp_shift"),
])
def test_the_encoder_refuses_bad_input(bad, message):
    spec = CsbSpec(block_rows=4, block_cols=4, batch=4, loss=True)  # 16 elements: at most 4 classes of 4 lanes
    fields = dict(v=np.zeros((2, 4), int), labels=np.array([0, 1, NO_SAMPLE, 1]), exp_shift=8, recip_shift=40, batch=4)
    fields.update(bad)
    with pytest.raises((ValueError, TypeError), match=message):
        encode_loss(spec, fields.pop("v"), fields.pop("labels"), **fields)


def test_parameter_and_label_words():
    assert loss.param_word(recip_shift=45, batch=64) == 45 | 64 << 16
    assert loss.read_param(45 | 64 << 16) == (45, 64)
    for word in (45 | 64 << 16 | 1 << 6, 49 | 64 << 16, 45, 45 | 64 << 16 | 1 << 31):
        assert loss.read_param(word) is None
    assert loss.label_words([0, NO_SAMPLE, 3]).tolist() == [0, 0xFFFF_FFFF, 3]
    assert loss.read_labels(np.array([0, 0xFFFF_FFFF, 3]), 4).tolist() == [0, NO_SAMPLE, 3]
    assert loss.read_labels(np.array([4]), 4) is None and loss.read_labels(np.array([0xFFFF_FFFE]), 4) is None
    assert loss.max_classes(CsbSpec(batch=16, loss=True)) == 16 and loss.max_classes(CsbSpec(batch=1)) == 32


@pytest.mark.parametrize("bits", [32, 64, 128])
def test_cycle_model_by_hand(bits):
    """The load (a beat a cycle: header, P, the labels, the logits), E (an element a cycle and 2 to drain its
    pipeline), the divider (49 cycles, then 33 a lane), the status load, O (an element a cycle and 2), the last
    code given; a refused P: the load, the status load and its handshake."""
    spec = CsbSpec(block_rows=16, block_cols=16, batch=8, stream_bits=bits, loss=True)
    parts, classes = spec.parts, 10
    words = encode_loss(spec, np.zeros((classes, 8), int), np.zeros(8, int), exp_shift=8, recip_shift=40, batch=8)
    wide = widen(words, transaction_sections(spec, int(words[0])), parts)
    load = 1 + 1 + 8 // parts + classes * 8 // parts
    cycles = transaction_cycles(spec, wide)
    assert (cycles.load, cycles.compute, cycles.drain) == (load, 2 * (80 + 2) + 49 + 33 * 8, 2)
    bad = encode_loss(spec, np.zeros((classes, 8), int), np.zeros(8, int), exp_shift=8, recip_shift=40, batch=8,
                           param=0)
    assert transaction_cycles(spec, widen(bad, transaction_sections(spec, int(bad[0])), parts)).total == load + 2
    assert int(words[0]) & FLAG_EW
