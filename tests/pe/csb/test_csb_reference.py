"""The plain reference model of docs/csb.md, checked on cases worked out by hand."""

from __future__ import annotations

import pytest

from codesign.pe.csb.reference import reference_output

FC = dict(block_rows=2, block_cols=3, kernel=1, out_h=1, out_w=1, batch=2, parallel=1, acc_bits=32)


def header(op: int, nnz: int, shift: int = 0) -> int:
    return op | (shift << 8) | (nnz << 16)


def pack(values: list[int]) -> list[int]:
    """Signed bytes, four to a word, little-endian."""
    raw = [v & 0xFF for v in values] + [0] * (-len(values) % 4)
    return [raw[i] | raw[i + 1] << 8 | raw[i + 2] << 16 | raw[i + 3] << 24 for i in range(0, len(raw), 4)]


def u32(values: list[int]) -> list[int]:
    return [v & 0xFFFFFFFF for v in values]


def test_fc_forward_by_hand():
    # W = [[0, 2, 0], [-3, 0, 1]]: entries (y, x) in row-major order: (0,1)=2, (1,0)=-3, (1,2)=1
    index = [0x01, 0x10, 0x12]
    x = [1, 10, 2, 20, 3, 30]  # X[channel][lane]
    acc = [100, 200, -5, 7]  # ACC[row][lane]
    words = [header(0, 3), *pack(index), *pack([2, -3, 1]), *pack(x), *u32(acc)]
    # row 0: 100 + 2*2 = 104, 200 + 2*20 = 240; row 1: -5 - 3*1 + 3 = -5, 7 - 30 + 30 = 7
    assert reference_output(words, **FC) == [0, 104, 240, *u32([-5]), 7]


def test_fc_error_backprop_uses_the_transposed_entries():
    index = [0x01, 0x10, 0x12]
    dy = [1, 2, 3, 4]  # DY[row][lane]
    acc = [0] * 6  # ACC[col][lane]
    words = [header(1, 3), *pack(index), *pack([2, -3, 1]), *pack(dy), *u32(acc)]
    # dx[0] = -3 * dy[1] = (-9, -12); dx[1] = 2 * dy[0] = (2, 4); dx[2] = 1 * dy[1] = (3, 4)
    assert reference_output(words, **FC) == [0, *u32([-9, -12]), 2, 4, 3, 4]


def test_weight_gradient_sums_the_batch_at_stored_entries_only():
    index = [0x12]
    x = [1, 2, 3, 4, 5, 6]  # X[col][lane]
    dy = [7, 8, 9, 10]  # DY[row][lane]
    words = [header(2, 1), *pack(index), *pack(x), *pack(dy), 1000]
    # G = 1000 + x[2]·dy[1] = 1000 + 5*9 + 6*10
    assert reference_output(words, **FC) == [0, 1105]


def test_accumulator_saturates_after_every_addition_in_order():
    spec = dict(FC, batch=1, block_rows=1, block_cols=2, acc_bits=16)
    index = [0x00, 0x01]
    # 32000 + 127*127 saturates to 32767 first, then - 127*127 = 16638 (not 32000)
    words = [header(0, 2), *pack(index), *pack([127, -127]), *pack([127, 127]), 32000]
    assert reference_output(words, **spec) == [0, 32767 - 127 * 127]


def test_conv_forward_and_error_by_hand():
    conv = dict(block_rows=1, block_cols=1, kernel=2, out_h=1, out_w=2, batch=1, parallel=1, acc_bits=32)
    w = [1, 2, 3, 4]  # one 2x2 kernel
    x = [1, 0, 2, 3, 1, 0]  # a 2x3 input tile
    words = [header(0, 1), *pack([0x00]), *pack(w), *pack(x), 0, 0]
    # out(0,0) = 1*1 + 2*0 + 3*3 + 4*1 = 14; out(0,1) = 1*0 + 2*2 + 3*1 + 4*0 = 7
    assert reference_output(words, **conv) == [0, 14, 7]
    eb = [header(1, 1), *pack([0x00]), *pack(w), *pack([1, 10]), *([0] * 6)]
    # dx = full correlation: row 0: 1, 2+10, 20; row 1: 3, 4+30, 40
    assert reference_output(eb, **conv) == [0, 1, 12, 20, 3, 34, 40]


def test_wg_partials_merge_per_group_with_saturation():
    spec = dict(block_rows=1, block_cols=1, kernel=1, out_h=1, out_w=2, batch=1, parallel=2, acc_bits=16)
    # positions 0 and 1 go to groups 0 and 1; products 127*127 = 16129 each
    words = [header(2, 1), *pack([0x00]), *pack([127, 127]), *pack([127, 127]), 1000]
    # sat(sat(1000 + 16129) + 16129) = 32767
    assert reference_output(words, **spec) == [0, 32767]


@pytest.mark.parametrize("buffer, grad, shift, expected", [
    (10, 3, 1, 8),       # 10 - 1.5 = 8.5 -> 8 (tie to even)
    (11, 3, 1, 10),      # 11 - 1.5 = 9.5 -> 10 (tie to even)
    (0, -5, 2, 1),       # 0 + 1.25 -> 1
    ((1 << 23) - 2, -(1 << 10), 0, (1 << 23) - 1),  # saturates high
    (-(1 << 23), 5, 0, -(1 << 23)),  # saturates low
    (7, 0, 31, 7),
])
def test_update_rounds_the_sum_once_and_saturates(buffer, grad, shift, expected):
    spec = dict(FC, block_rows=1, block_cols=1)
    words = [header(3, 1, shift), *pack([0x00]), buffer & 0xFFFFFFFF, grad & 0xFFFFFFFF]
    assert reference_output(words, **spec) == [0, expected & 0xFFFFFFFF]


def test_status_words():
    assert reference_output([header(0, 0) | 1 << 30], **FC) == [1]
    assert reference_output([header(0, 0, shift=3)], **FC) == [1]
    assert reference_output([header(0, 7)], **FC) == [2]  # 2x3 block holds at most 6 entries
    # index y=2 is outside a 2-row block: the whole transaction is consumed, only the status comes back
    words = [header(0, 1), *pack([0x20]), *pack([5]), *pack([0] * 6), 0, 0, 0, 0]
    assert reference_output(words, **FC) == [3]
    with pytest.raises(ValueError, match="truncated"):
        reference_output(words[:-1], **FC)
