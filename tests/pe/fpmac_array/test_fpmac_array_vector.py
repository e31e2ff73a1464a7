"""The element-wise operations: header and status, hand-worked ReLU, mask and SGD, agreement with the host's update,
the independent reference on every grid point's stimulus, and a stimulus that can tell roundings apart."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.contracts.constants import STATUS_BAD_HEADER, STATUS_OK
from codesign.pe.fpmac_array import stimulus_vector, vector
from codesign.pe.fpmac_array.contract import STATUS_TOO_LARGE, Header
from codesign.pe.fpmac_array.pe import FpmacArrayPE
from codesign.pe.fpmac_array.reference import reference_output
from codesign.pe.fpmac_array.spec import FpmacArraySpec

# (E=4, fb=3) in a max_fb=3 container: bias 7; 1.0 = 7 << 3 = 56; sign bit 1 << 7
SMALL = FpmacArraySpec(exp_bits=4, max_fb=3, max_m=4, max_n=4, max_k=4)
SIGN = 1 << 7


def value(x: float) -> int:
    """The (E=4, fb=3) container of a value with an exact code (normal range)."""
    negative, x = x < 0, abs(x)
    exponent = int(np.floor(np.log2(x)))
    fraction = round((x / 2.0 ** exponent - 1) * 8)
    assert fraction < 8 and (1 + fraction / 8) * 2.0 ** exponent == x
    return int(negative) << 7 | (exponent + 7) << 3 | fraction


def test_the_header_word_and_its_statuses():
    header = vector.VectorHeader(op=vector.OP_SGD, m=3, n=4, fb=2)
    assert header.word() == 0x6200_0403 and vector.VectorHeader.parse(0x6200_0403) == header
    assert vector.is_vector(header.word()) and not vector.is_vector(Header(m=3, n=4, k=1, fb=2).word())
    assert (header.input_words, header.output_words, header.macs) == (3 + 36, 24, 36)
    with pytest.raises(ValueError, match="K > 0"):
        vector.VectorHeader.parse(Header(m=1, n=1, k=1, fb=1).word())
    statuses = {(0, 1, 1, 1): STATUS_BAD_HEADER, (4, 1, 1, 1): STATUS_BAD_HEADER, (1, 0, 1, 1): STATUS_BAD_HEADER,
                (2, 1, 0, 1): STATUS_BAD_HEADER, (3, 1, 1, 0): STATUS_BAD_HEADER, (1, 5, 1, 1): STATUS_TOO_LARGE,
                (2, 1, 5, 1): STATUS_TOO_LARGE, (3, 1, 1, 4): STATUS_TOO_LARGE, (3, 4, 4, 3): STATUS_OK}
    for (op, m, n, fb), status in statuses.items():
        word = vector.VectorHeader(op=op, m=m, n=n, fb=fb).word()
        assert vector.header_status(SMALL, word) == status
        if status != STATUS_OK:  # a refused header is the whole transaction, at the reference too
            assert reference_output([word], **SMALL.to_dict()) == [status]


def test_relu_and_mask_by_hand():
    # +1.5, -1.5, +0, -0, the smallest subnormal (+), the largest value (-); a low bit set below fb = 2 on +1.5
    x = np.array([[value(1.5) | 1, value(-1.5), 0, SIGN, 1 << 1, SIGN | 0x7F]], dtype=np.uint64)
    relu = vector.relu(SMALL, x, fb=2)
    assert relu.tolist() == [[value(1.5), 0, 0, 0, 1 << 1, 0]]  # -0 is not positive: +0; bits below fb cleared
    z = np.array([[0, SIGN, value(1.0), value(-1.0), 1, 1 << 1]], dtype=np.uint64)  # z = 1 is below fb = 2: +0
    assert vector.mask(SMALL, x, z, fb=2).tolist() == [[0, 0, 0, 0, 0, SIGN | 0x7E]]


def test_sgd_by_hand_and_its_roundings():
    # wd 0.5, mu 0.5, step -0.25; g 1, p 2, v 1: g' = 0.5*2 + 1 = 2, v' = 0.5*1 + 2 = 2.5, p' = -0.25*2.5 + 2 =
    # 1.375 exactly at fb = 3
    scalars = [value(0.5), value(0.5), value(-0.25)]
    one = np.array([[value(1.0)]], dtype=np.uint64)
    p, v = vector.sgd(SMALL, scalars, one, np.array([[value(2.0)]]), one, fb=3)
    assert (p.tolist(), v.tolist()) == ([[value(1.375)]], [[value(2.5)]])
    # at fb = 1 (quantum 1 in [2, 4), 0.5 in [1, 2)): v' = 2.5 is a tie: 2 (even, toward zero) or 3 (away); then
    # p' = 2 - 0.5 = 1.5, or 2 - 0.75 = 1.25, a tie again: 1.5 away from zero
    for rounding, expected in (("nearest_even", (1.5, 2.0)), ("nearest_away", (1.5, 3.0)),
                               ("toward_zero", (1.5, 2.0))):
        spec = FpmacArraySpec(exp_bits=4, max_fb=3, rounding=rounding)
        p, v = vector.sgd(spec, scalars, one, np.array([[value(2.0)]]), one, fb=1)
        assert (p.tolist(), v.tolist()) == ([[value(expected[0])]], [[value(expected[1])]]), rounding


def test_sgd_is_the_host_trainers_update_word_for_word():
    from codesign.design.families.fpmac_array import fb_setup
    from codesign.loops.fb import FbMlpTrainer
    from codesign.train.config import config_from_dict

    spec = FpmacArraySpec(exp_bits=5, max_fb=9, max_m=8, max_n=4, max_k=16)
    config = config_from_dict({"seed": 3, "model": {"name": "mlp", "hidden": [12]},
                               "optim": {"epochs": 2, "batch_size": 20, "lr": 0.1, "momentum": 0.9,
                                         "weight_decay": 5e-4},
                               "techniques": {"abvs": {"fb_min": 5, "fb_max": 7, "exp_bits": 5}}})
    trainer = FbMlpTrainer(fb_setup(config, spec))
    rng = np.random.default_rng(0)
    params = trainer.weights + trainer.biases
    grads = [trainer.to_words(rng.normal(0, 0.5, p.shape)) for p in params]
    trainer.velocity = [trainer.to_words(rng.normal(0, 0.1, p.shape)) for p in params]
    velocity = [v.copy() for v in trainer.velocity]
    scalars = trainer.to_words([trainer.setup.weight_decay, trainer.setup.momentum, -trainer.learning_rate()])
    expected = [vector.sgd(spec, scalars, g, p, v, fb=trainer.fb) for g, p, v in zip(grads, params, velocity)]
    trainer._sgd(grads)
    for (p, v), param, vel in zip(expected, trainer.weights + trainer.biases, trainer.velocity):
        assert np.array_equal(p, param) and np.array_equal(v, vel)
    assert any(not np.array_equal(p, q) for (p, _), q in zip(expected, params))  # the update moved something


@pytest.mark.parametrize("case", FpmacArrayPE().verification_grid(), ids=lambda case: case.id)
def test_every_element_wise_transaction_of_the_grid_equals_the_reference(case):
    transactions = stimulus_vector.directed(case.spec, np.random.default_rng(1))
    transactions += stimulus_vector.random(case.spec, 40, np.random.default_rng(2))
    assert stimulus_vector.count_elements(transactions) >= 1000
    for words_in, words_out in transactions:
        assert reference_output(words_in, **case.spec.to_dict()) == words_out.tolist()


def test_the_directed_set_tells_roundings_and_a_fused_update_apart():
    spec = FpmacArraySpec(exp_bits=5, max_fb=10, max_m=5, max_n=5, max_k=5)
    other = FpmacArraySpec(exp_bits=5, max_fb=10, rounding="nearest_away", max_m=5, max_n=5, max_k=5)
    transactions = stimulus_vector.directed(spec, np.random.default_rng(1))
    differ = sum(reference_output(words_in, **other.to_dict()) != words_out.tolist()
                 for words_in, words_out in transactions)
    ties = stimulus_vector._sgd_ties(spec, 10)
    assert len(ties) == 2 and all(reference_output(w, **other.to_dict()) != o.tolist() for w, o in ties)
    assert differ >= 10
