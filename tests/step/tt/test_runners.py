"""The stream work of a board's host around PE calls (codesign.step.tt.runners): input words, results read back,
refusals named, and the Streamed runner that times that work on a desktop."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.pe.tt import golden
from codesign.pe import transaction_cycles
from codesign.step.tt.runners import (AnswerError, Streamed, call_header, pack_stage, share_calls, stage_buffers,
                                   stage_layout, unpack_results)
from codesign.step.tt.schedule import StepHardware, assign_calls
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec
from codesign.step.tt.step import GoldenRunner


def _words_by_call(hardware, calls):
    """Each call's words as :func:`stage_buffers` lays them out in its copy's buffer, in call order."""
    layout = stage_layout(hardware, calls)
    buffers = stage_buffers(hardware, calls, layout)
    found = {}
    for buffer, copy in zip(buffers, layout.copies):
        assert buffer.dtype == np.uint32 and buffer.size == copy.words_in
        ends = list(copy.starts[1:]) + [copy.words_in]
        for position, start, end in zip(copy.positions, copy.starts, ends):
            found[position] = buffer[start:end]
    assert sorted(found) == list(range(len(calls)))  # every call in exactly one buffer
    return [found[p] for p in range(len(calls))]


def _calls(rng):
    a1 = rng.integers(-32768, 32768, size=(3, 2, 9))
    b1 = rng.integers(-128, 128, size=(5, 2, 9))
    a2 = rng.integers(-32768, 32768, size=(2, 3, 7))
    b2 = rng.integers(-8, 8, size=(4, 3))
    a2[0, 0, 0], b2[0, 0] = -32768, -8  # the largest product magnitude
    return [("tt1", a1, b1), ("tt2", a2, b2), ("tt2", a2[1:], b2)]


@pytest.mark.parametrize("stream_bits", [32, 64, 128])
def test_results_come_back_from_the_golden_output_words(stream_bits):
    hardware = StepHardware().at_stream_bits(stream_bits)
    calls = _calls(np.random.default_rng(stream_bits))
    out = np.concatenate([golden.output(hardware.spec(pe), a, b) for pe, a, b in calls]).astype(np.uint32)
    assert out.size == sum(copy.words_out for copy in stage_layout(hardware, calls).copies)
    results = unpack_results(hardware, calls, out)
    for got, (pe, a, b) in zip(results, calls):
        expected = golden.kernel(hardware.spec(pe), a, b)
        assert got.dtype == np.int32 and got.shape == expected.shape and np.array_equal(got, expected)
        assert got.min() < 0  # sign-extended, not read as unsigned
    assert [w.tolist() for w in _words_by_call(hardware, calls)] == \
        [golden.words(hardware.spec(pe), a, b).tolist() for pe, a, b in calls]


def test_a_refused_or_short_answer_is_an_error_naming_it():
    hardware = StepHardware()
    calls = _calls(np.random.default_rng(0))[:1]
    good = golden.output(hardware.spec("tt1"), *calls[0][1:]).astype(np.uint32)
    refused = good.copy()
    refused[0] = 2
    with pytest.raises(AnswerError, match=r"refused a \(3, 5\) transaction: status 2"):
        unpack_results(hardware, calls, refused)
    with pytest.raises(AnswerError, match="answered 14 of 15 result words"):
        unpack_results(hardware, calls, good[:-1])
    with pytest.raises(AnswerError, match="no status word"):
        unpack_results(hardware, calls, good[:0])


def test_streamed_runner_answers_as_its_runner_and_times_the_host_side():
    hardware = StepHardware(pe1=Tt1Spec(a_bits=16, b_bits=8, stream_bits=128),
                            pe2=Tt2Spec(a_bits=16, b_bits=4, max_j=128, max_l=64, stream_bits=64))
    calls = _calls(np.random.default_rng(1))
    streamed = Streamed(GoldenRunner())
    got = streamed.run(hardware, calls)
    expected = GoldenRunner().run(hardware, calls)
    assert all(np.array_equal(g, e) and g.shape == e.shape for g, e in zip(got, expected))
    assert streamed.host_seconds > 0


@pytest.mark.parametrize("stream_bits", [32, 128])
def test_equal_calls_packed_together_give_each_calls_own_words(stream_bits):
    """A contraction's cuts (equal shapes, strided views of one tensor, narrow and wide code types) packed in one
    pass: every call's words are golden.words's for that call alone."""
    hardware = StepHardware().at_stream_bits(stream_bits)
    rng = np.random.default_rng(7)
    state = rng.integers(-128, 128, size=(6, 8, 256)).astype(np.int8)
    core = rng.integers(-8, 8, size=(16, 8))
    grads = rng.integers(-32768, 32768, size=(12, 7, 64)).astype(np.int16)
    saved = rng.integers(-128, 128, size=(4, 7, 64))
    calls = [("tt2", state[i:i + 2, :, k:k + 64], core) for i in (0, 2, 4) for k in range(0, 256, 64)]
    calls += [("tt1", grads[i:i + 4], saved) for i in (0, 4, 8)] + [("tt2", state[:1, :, :5], core[:3])]
    words = _words_by_call(hardware, calls)
    assert [w.tolist() for w in words] == [golden.words(hardware.spec(pe), a, b).tolist() for pe, a, b in calls]
    layout = stage_layout(hardware, calls)
    assert list(layout.cycles) == [transaction_cycles(pe, hardware.spec(pe), w) for (pe, _, _), w in zip(calls, words)]
    assert [call_header(pe, a.shape, b.shape) for pe, a, b in calls] == [int(w[0]) for w in words]
    assert [copy.cycles for copy in layout.copies] == [sum(layout.cycles[p] for p in copy.positions)
                                                       for copy in layout.copies]
    for positions, runs in zip(layout.groups, layout.runs):  # each run: the group's next calls, back to back
        assert sum(count for _, _, count in runs) == len(positions)
        assert len({copy for copy, _, _ in runs}) == len(runs)  # a copy's calls of a group merge into one run
        row = 0
        for copy, start, count in runs:
            mine = layout.copies[copy]
            first = mine.positions.index(positions[row])
            assert mine.positions[first:first + count] == positions[row:row + count] and mine.starts[first] == start
            row += count
    assert any(count > 1 for runs in layout.runs for _, _, count in runs)  # and some do merge here
    out = np.concatenate([golden.output(hardware.spec(pe), a, b) for pe, a, b in calls]).astype(np.uint32)
    for got, (pe, a, b) in zip(unpack_results(hardware, calls, out), calls):
        assert np.array_equal(got, golden.kernel(hardware.spec(pe), a, b))
    out[sum(golden.output(hardware.spec(pe), a, b).size for pe, a, b in calls[:4])] = 1  # the fifth call's status
    with pytest.raises(AnswerError, match=r"refused a \(2, 16, 64\) transaction: status 1"):
        unpack_results(hardware, calls, out)


def test_narrow_code_types_are_still_checked_against_a_narrower_width():
    spec = Tt2Spec(a_bits=8, b_bits=4)
    a = np.zeros((1, 2, 3), dtype=np.int8)
    with pytest.raises(ValueError, match="4-bit range"):
        golden.words(spec, a, np.array([[8, 0]], dtype=np.int8))
    with pytest.raises(ValueError, match="do not fit"):
        too_long = np.zeros((2, 1, 2, 100), dtype=np.int8)  # K above max_k
        golden.stacked_words(spec, too_long, np.zeros((2, 1, 2), dtype=np.int8))
    assert golden.words(spec, a, np.array([[7, -8]], dtype=np.int8)).tolist() == \
        golden.words(spec, a.astype(np.int64), np.array([[7, -8]])).tolist()


def test_a_stages_calls_are_shared_among_copies_by_the_hosts_rule():
    """Every call goes to exactly one copy of its PE, the copy assign_calls gives it, in call order per copy."""
    hardware = StepHardware(pe1_units=2, pe2_units=3)
    calls = _calls(np.random.default_rng(3)) * 3
    cycles = [17, 5, 9, 40, 2, 2, 8, 30, 11]
    shares = share_calls(hardware, calls, cycles)
    for pe in ("tt1", "tt2"):
        positions = [p for p, call in enumerate(calls) if call[0] == pe]
        units = assign_calls([cycles[p] for p in positions], hardware.units(pe))
        expected = [(pe, unit, [p for p, u in zip(positions, units) if u == unit]) for unit in sorted(set(units))]
        assert [share for share in shares if share[0] == pe] == expected
    assert sorted(p for _, _, mine in shares for p in mine) == list(range(len(calls)))


def test_a_stage_layout_is_worked_out_once_per_shapes_and_builds():
    """The same shapes on the same builds give the same layout (the host's per-stage work is not redone each
    step); other builds or shapes give their own."""
    hardware = StepHardware(pe1_units=2, pe2_units=2)
    calls = _calls(np.random.default_rng(4))
    other_codes = _calls(np.random.default_rng(5))
    assert stage_layout(hardware, calls) is stage_layout(hardware, other_codes)
    assert stage_layout(hardware.at_stream_bits(64), calls) is not stage_layout(hardware, calls)
    assert stage_layout(hardware, calls[:2]) is not stage_layout(hardware, calls)


def test_packing_refuses_buffers_that_do_not_fit_the_layout():
    hardware = StepHardware(pe2_units=2)
    calls = _calls(np.random.default_rng(6))
    layout = stage_layout(hardware, calls)
    good = [np.zeros(copy.words_in, dtype=np.uint32) for copy in layout.copies]
    with pytest.raises(ValueError, match=f"{len(layout.copies) - 1} buffers for {len(layout.copies)} copies"):
        pack_stage(hardware, calls, layout, good[:-1])
    short = good[:-1] + [np.zeros(layout.copies[-1].words_in - 1, dtype=np.uint32)]
    with pytest.raises(ValueError, match=f"needs a 1-D uint32 buffer of {layout.copies[-1].words_in} words"):
        pack_stage(hardware, calls, layout, short)
    with pytest.raises(ValueError, match="uint32"):
        pack_stage(hardware, calls, layout, [buffer.astype(np.int64) for buffer in good])
    roomy = [np.full(copy.words_in + 3, 7, dtype=np.uint32) for copy in layout.copies]
    pack_stage(hardware, calls, layout, roomy)  # a DMA buffer may be longer: the words past the calls stay
    assert all(buffer[-3:].tolist() == [7, 7, 7] for buffer in roomy)
    assert all(np.array_equal(buffer[:copy.words_in], exact)
               for buffer, copy, exact in zip(roomy, layout.copies, stage_buffers(hardware, calls, layout)))
