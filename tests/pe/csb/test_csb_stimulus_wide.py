"""codesign.pe.csb.stimulus_wide: the 32-bit build's stimulus as a wide build's beats, answered as the plain
reference answers the beats, with garbled padding and refused header beats in the set."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from codesign.pe.csb import beats
from codesign.pe.csb.pe import CsbPE
from codesign.pe.csb.spec import CsbSpec
from codesign.pe.csb.stimulus import build_transactions
from codesign.pe.csb.stimulus_chain import chain_transactions
from codesign.pe.csb.stimulus_wide import dropped_hold, garble_padding, refused_header_beats, wide_transactions
from codesign.pe.csb.stream import transaction_sections

WIDE = CsbSpec(block_rows=3, block_cols=4, kernel=3, out_h=2, out_w=2, batch=4, parallel=2, max_stride=2,
               stream_bits=128)


def narrow_pairs(spec: CsbSpec) -> list:
    twin = replace(spec, stream_bits=32)
    return build_transactions(twin, count=6, seed=3) + chain_transactions(twin, target=500, seed=3)


def test_wide_pairs_are_the_narrow_ones_as_beats_and_the_reference_agrees():
    pairs = narrow_pairs(WIDE)
    wide = wide_transactions(WIDE, pairs, seed=1)
    lead = len(refused_header_beats(WIDE)) + len(dropped_hold(WIDE))
    assert lead == 8 and len(wide) == len(pairs) + lead
    statuses = [out.tolist() for _, out in wide[:lead]]
    assert statuses == [[1, 0, 0, 0]] * 5 + [[0, 0, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0]]  # HOLD, refused, CARRY
    assert {int(np.flatnonzero(stream[1:])[0]) for stream, _ in wide[:5]} == {0, 1, 2}  # every upper part set
    answer = CsbPE().reference_session(WIDE)  # in order: chains hold sums across transactions
    assert sum(np.asarray(answer(w)).tolist() != o.tolist() for w, o in wide) == 0
    for (words, expected), (stream, out) in zip(pairs, wide[lead:]):
        assert out.tolist() == beats.widen_output(expected, 4).tolist()
        assert stream.size % 4 == 0 and int(stream[0]) == int(words[0])
    garbled = [stream for (words, _), (stream, _) in zip(pairs, wide[lead:])
               if stream.size > words.size and np.count_nonzero(stream) > np.count_nonzero(words)]
    assert len(garbled) > len(pairs) // 4  # about half carry random words in their unused parts


def test_garbling_touches_the_unused_parts_only():
    words = narrow_pairs(WIDE)[1][0]
    layout = transaction_sections(WIDE, int(words[0]))
    stream = beats.widen(words, layout, 4)
    garbled = garble_padding(stream, layout, 4, np.random.default_rng(0))
    assert beats.narrow(garbled, layout, 4).tolist() == words.tolist()
    assert garbled[:4].tolist() == stream[:4].tolist()  # the header beat stays clear
    assert np.count_nonzero(garbled != stream) > 0


def test_a_set_not_answered_in_order_is_refused():
    pairs = narrow_pairs(WIDE)
    words, out = pairs[2]
    tampered = pairs[:2] + [(words, out ^ np.uint32(1))] + pairs[3:]
    with pytest.raises(ValueError, match="transaction 2"):
        wide_transactions(WIDE, tampered, seed=1)


def test_the_pe_builds_a_wide_point_from_its_narrow_twin():
    pe = CsbPE()
    spec = replace(WIDE, stream_bits=64)
    options = pe.stimulus_options()
    narrow = pe.build_stimulus(replace(spec, stream_bits=32), options)
    wide = pe.build_stimulus(spec, options)
    assert len(wide) == len(narrow) + 8 and all(stream.size % 2 == 0 for stream, _ in wide)
