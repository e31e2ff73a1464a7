"""The CSB PE at word level: hand-worked words, the plain reference model, statuses, layers as chained transactions."""

from __future__ import annotations

from dataclasses import replace

import time

import numpy as np
import pytest

from codesign.hw.vectors import read_transactions
from codesign.pe.csb.format import encode
from codesign.pe.csb.golden import backward_error, forward, weight_grad
from codesign.pe.csb.reference import reference_output
from codesign.pe.csb.spec import CsbSpec
from codesign.pe.csb.stimulus import build_transactions, count_macs, top_up_updates, write_stimulus
from codesign.pe.csb.stream import (
    Op,
    decode_output,
    encode_transaction,
    expected_output,
    header_word,
    parse_transaction,
    split_stream,
)

FC = CsbSpec(block_rows=2, block_cols=3, kernel=1, out_h=1, out_w=1, batch=2, parallel=1, acc_bits=32)
CONFIGS = [
    FC,
    CsbSpec(block_rows=16, block_cols=16, kernel=1, out_h=1, out_w=1, batch=8, parallel=1, acc_bits=32),
    CsbSpec(block_rows=4, block_cols=4, kernel=3, out_h=4, out_w=4, batch=4, parallel=2, acc_bits=16),
    CsbSpec(block_rows=3, block_cols=8, kernel=1, out_h=1, out_w=1, batch=1, parallel=4, acc_bits=32),
    CsbSpec(block_rows=1, block_cols=1, kernel=2, out_h=2, out_w=3, batch=3, parallel=8, acc_bits=20),
]


def u32(values):
    return [v & 0xFFFFFFFF for v in values]


def packed(values):
    raw = [v & 0xFF for v in values] + [0] * (-len(values) % 4)
    return [raw[i] | raw[i + 1] << 8 | raw[i + 2] << 16 | raw[i + 3] << 24 for i in range(0, len(raw), 4)]


def test_fc_forward_words_by_hand():
    # W = [[0, 2, 0], [-3, 0, 1]]: entries (0,1)=2, (1,0)=-3, (1,2)=1
    words = encode_transaction(FC, Op.FP, index=np.array([0x01, 0x10, 0x12]), weights=np.array([2, -3, 1]).reshape(3, 1, 1),
                               x=np.array([1, 10, 2, 20, 3, 30]).reshape(3, 1, 1, 2),
                               acc=np.array([100, 200, -5, 7]).reshape(2, 1, 1, 2))
    assert words.tolist() == [0x0003_0000, 0x0012_1001, *packed([2, -3, 1]), *packed([1, 10, 2, 20, 3, 30]),
                              100, 200, *u32([-5]), 7]
    assert expected_output(FC, words).tolist() == [0, 104, 240, *u32([-5]), 7]


def test_upd_words_by_hand():
    spec = CsbSpec(block_rows=1, block_cols=2, batch=1)
    words = encode_transaction(spec, "upd", index=np.array([0x00, 0x01]), buffer=np.array([3, -(1 << 23)]).reshape(2, 1, 1),
                               grads=np.array([-1, 1]).reshape(2, 1, 1), shift=1)
    assert words.tolist() == [0x0002_0103, 0x0100, 3, 0xFF80_0000, 0xFFFF_FFFF, 1]
    # 3 + 0.5 -> 4 (to even); -2^23 - 0.5 -> saturates at -2^23
    assert expected_output(spec, words).tolist() == [0, 4, *u32([-(1 << 23)])]


@pytest.mark.parametrize("index", range(len(CONFIGS)))
def test_stimulus_agrees_with_the_reference_model(index):
    spec = CONFIGS[index]
    transactions = build_transactions(spec, count=40, seed=index)
    statuses = {int(out[0]) for _, out in transactions}
    assert statuses == ({0, 1, 2} if spec.capacity == 256 else {0, 1, 2, 3})
    for words_in, words_out in transactions:
        if int(words_out[0]) in (1, 2):
            assert words_in.size == 1
            continue
        assert reference_output([int(w) for w in words_in], **spec.to_dict()) == words_out.tolist()


def test_refused_headers():
    assert expected_output(FC, [header_word(Op.FP, 1) | 1 << 31]).tolist() == [1]
    assert expected_output(FC, [header_word(Op.UPD, 0) | 1 << 5]).tolist() == [1]  # EW has no op 3
    assert expected_output(FC, [header_word(Op.EB, 0, 3)]).tolist() == [1]  # a shift outside UPD
    assert expected_output(FC, [header_word(Op.UPD, 7)]).tolist() == [2]
    assert expected_output(FC, [header_word(Op.FP, 511)]).tolist() == [2]
    with pytest.raises(ValueError, match="new header"):
        expected_output(FC, [header_word(Op.UPD, 7), 0, 0])


def test_index_outside_the_block_consumes_the_transaction():
    w = np.ones((1, 1, 1), dtype=np.int64)
    x = np.ones((3, 1, 1, 2), dtype=np.int64)
    acc = np.zeros((2, 1, 1, 2), dtype=np.int64)
    for byte in (0x03, 0x20, 0xFF):
        with pytest.raises(ValueError, match="outside"):
            encode_transaction(FC, Op.FP, index=np.array([byte]), weights=w, x=x, acc=acc)
        words = encode_transaction(FC, Op.FP, index=np.array([byte]), weights=w, x=x, acc=acc, check=False)
        assert expected_output(FC, words).tolist() == [3]
        with pytest.raises(ValueError, match="truncated"):
            expected_output(FC, words[:-1])
    big = CsbSpec(batch=1)
    words = encode_transaction(big, Op.FP, index=np.array([0xFF]), weights=w, x=np.ones((16, 1, 1, 1), int),
                               acc=np.zeros((16, 1, 1, 1), int))
    assert expected_output(big, words).tolist() == [0] + [0] * 15 + [1]


@pytest.mark.parametrize("op", list(Op))
def test_truncated_and_overlong_transactions(op):
    spec = CONFIGS[2]
    words = next(w for w, out in build_transactions(spec, count=30, seed=1)
                 if w[0] & 3 == op and w[0] >> 16 and out[0] == 0)
    for cut in range(1, words.size):
        with pytest.raises(ValueError, match="truncated"):
            parse_transaction(spec, words[:cut])
    with pytest.raises(ValueError, match="beyond"):
        parse_transaction(spec, np.append(words, np.uint32(0)))
    with pytest.raises(ValueError, match="truncated"):
        parse_transaction(spec, [])


def test_encode_refuses_bad_input():
    w = np.ones((1, 1, 1), dtype=np.int64)
    x = np.ones((3, 1, 1, 2), dtype=np.int64)
    acc = np.zeros((2, 1, 1, 2), dtype=np.int64)
    ok = dict(index=np.array([0]), weights=w, x=x, acc=acc)
    assert encode_transaction(FC, Op.FP, **ok).size == 1 + 1 + 1 + 2 + 4
    with pytest.raises(ValueError, match="capacity"):
        encode_transaction(FC, Op.WG, index=np.arange(7), x=x, dy=acc, grads=np.zeros((7, 1, 1), int))
    with pytest.raises(ValueError, match="shift"):
        encode_transaction(FC, Op.FP, shift=2, **ok)
    with pytest.raises(ValueError, match="needs acc"):
        encode_transaction(FC, Op.FP, index=np.array([0]), weights=w, x=x)
    with pytest.raises(ValueError, match="got also"):
        encode_transaction(FC, Op.FP, dy=acc, **ok)
    with pytest.raises(ValueError, match="shape"):
        encode_transaction(FC, Op.FP, index=np.array([0]), weights=w, x=x[:2], acc=acc)
    with pytest.raises(ValueError, match="8-bit"):
        encode_transaction(FC, Op.FP, index=np.array([0]), weights=w * 128, x=x, acc=acc)
    with pytest.raises(ValueError, match="16-bit"):
        encode_transaction(CONFIGS[2], Op.WG, index=np.array([0]), x=np.zeros((4, 6, 6, 4), int),
                           dy=np.zeros((4, 4, 4, 4), int), grads=np.full((1, 3, 3), 1 << 15))
    with pytest.raises(ValueError, match="24-bit"):
        encode_transaction(FC, Op.UPD, index=np.array([0]), buffer=w << 23, grads=w)
    with pytest.raises(ValueError, match="32-bit"):
        encode_transaction(FC, Op.UPD, index=np.array([0]), buffer=w, grads=w << 31)
    with pytest.raises(ValueError, match="bytes"):
        encode_transaction(FC, Op.FP, index=np.array([256]), weights=w, x=x, acc=acc)
    with pytest.raises(ValueError, match="op"):
        encode_transaction(FC, 4, **ok)
    with pytest.raises(ValueError, match="op"):
        encode_transaction(FC, "mac", **ok)
    with pytest.raises(ValueError, match="nnz"):
        header_word(Op.FP, 512)
    with pytest.raises(ValueError, match="shift"):
        header_word(Op.UPD, 0, 32)


def test_ignored_bits_are_ignored():
    spec = CsbSpec(block_rows=2, block_cols=3, batch=1, acc_bits=16)
    words = encode_transaction(spec, Op.FP, index=np.array([0x12]), weights=np.full((1, 1, 1), -2),
                               x=np.array([0, 0, 5]).reshape(3, 1, 1, 1), acc=np.array([7, -7]).reshape(2, 1, 1, 1))
    noisy = words.copy()
    noisy[1] |= 0xFFFF_FF00  # index section: one byte used
    noisy[2] |= 0xFFFF_FF00  # weights: one byte
    noisy[3] |= 0xFF00_0000  # x: three bytes
    noisy[4] |= 0xABCD_0000  # accumulators: 16 bits used
    noisy[5] = (noisy[5] & 0xFFFF) | 0x1234_0000
    assert expected_output(spec, noisy).tolist() == expected_output(spec, words).tolist() == [0, 7, *u32([-17])]


def test_decode_output():
    spec = CONFIGS[2]
    for words_in, words_out in build_transactions(spec, count=8, seed=4):
        header = int(words_in[0])
        status, results = decode_output(spec, header & 3, header >> 16 & 0x1FF, words_out)
        assert status == int(words_out[0]) and results.size == words_out.size - 1
        assert np.array_equal(results & 0xFFFFFFFF, words_out[1:].astype(np.int64))
    with pytest.raises(ValueError, match="needs"):
        decode_output(spec, Op.FP, 1, np.zeros(3, np.uint32))
    with pytest.raises(ValueError, match="status"):
        decode_output(spec, Op.FP, 1, np.array([7], np.uint32))
    with pytest.raises(ValueError, match="truncated"):
        decode_output(spec, Op.FP, 1, np.zeros(0, np.uint32))


def test_split_stream_follows_headers():
    spec = CONFIGS[4]
    transactions = build_transactions(spec, count=20, seed=5)
    stream = np.concatenate([words for words, _ in transactions])
    parts = split_stream(spec, stream)
    assert [p.tolist() for p in parts] == [w.tolist() for w, _ in transactions]
    with pytest.raises(ValueError, match="truncated"):
        split_stream(spec, stream[:-1])


def test_stimulus_is_reproducible_and_large_enough():
    spec = CsbSpec(block_rows=8, block_cols=8, kernel=3, out_h=4, out_w=4, batch=4, parallel=2, acc_bits=24)
    start = time.perf_counter()
    transactions = build_transactions(spec, count=40, seed=1)
    elapsed = time.perf_counter() - start
    macs = count_macs(spec, transactions)
    assert min(macs["fp"], macs["eb"], macs["wg"]) >= 10_000 and macs["upd"] > 0 and macs["refused"] > 0
    assert elapsed < 3.0
    again = build_transactions(spec, count=40, seed=1)
    assert all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(transactions, again))
    other = build_transactions(spec, count=40, seed=2)
    assert any(not np.array_equal(a[0], b[0]) for a, b in zip(transactions, other))
    with pytest.raises(ValueError, match="count"):
        build_transactions(spec, count=-1, seed=0)


def test_written_stimulus_reads_back(tmp_path):
    spec = CONFIGS[3]
    path = write_stimulus(tmp_path / "csb.txn", spec, count=10, seed=3)
    back, meta = read_transactions(path, pe="csb")
    expected = build_transactions(spec, count=10, seed=3)
    assert meta == {key: str(value) for key, value in spec.to_dict().items()}
    assert [(a.tolist(), b.tolist()) for a, b in back] == [(a.tolist(), b.tolist()) for a, b in expected]


# -- a layer equals its chain of PE transactions ----------------------------------------------------

def run_pe(spec, op, **sections):
    words_out = expected_output(spec, encode_transaction(spec, op, **sections))
    status, results = decode_output(spec, op, len(sections.get("index", [])), words_out)
    assert status == 0
    return results


def pad(array, size):
    return np.concatenate([array, np.zeros((size - array.shape[0], *array.shape[1:]), np.int64)])


@pytest.mark.parametrize("conv", [False, True])
def test_layers_are_chained_transactions(conv):
    """Stream every block of a saturating layer through expected_output, chaining accumulators, and compare."""
    rng = np.random.default_rng(8)
    k, rows, cols, n = (2, 5, 7, 3) if conv else (1, 11, 9, 5)
    br, bc = 2, 3
    shape = (rows, cols, k, k) if conv else (rows, cols)
    dense = np.where(rng.random(shape[:2]).reshape(*shape[:2], *([1] * (len(shape) - 2))) < 0.6,
                     rng.choice([-128, 127, 100], size=shape), 0)
    csb = encode(dense, block_rows=br, block_cols=bc)
    h = w = 4 if conv else 1
    oh = h - k + 1
    x = rng.choice([-128, 127, 90], size=(n, cols, h, w) if conv else (n, cols))
    dy = rng.choice([-128, 127, 90], size=(n, rows, oh, oh) if conv else (n, rows))
    spec = CsbSpec(block_rows=br, block_cols=bc, kernel=k, out_h=oh, out_w=oh, batch=n, parallel=3, acc_bits=16)
    X = x.reshape(n, cols, h, w).transpose(1, 2, 3, 0)
    DY = dy.reshape(n, rows, oh, oh).transpose(1, 2, 3, 0)
    # FP: block rows, blocks left to right, ACC chained
    y = np.zeros((rows, oh, oh, n), np.int64)
    for r0 in range(0, rows, br):
        acc = np.zeros((br, oh, oh, n), np.int64)
        for block in (b for b in csb.blocks() if b.row == r0 // br):
            acc = run_pe(spec, Op.FP, index=block.index, weights=block.values, x=pad(X[block.col * bc:][:bc], bc),
                         acc=acc).reshape(acc.shape)
        y[r0:r0 + br] = acc[:min(br, rows - r0)]
    got = forward(csb, x, spec=spec)
    assert np.array_equal(got, y.transpose(3, 0, 1, 2).reshape(got.shape))
    assert np.any(np.abs(y) >= 32767)
    # EB: stored block columns, blocks top to bottom (the transposed view), ACC chained
    dx = np.zeros((cols, h, w, n), np.int64)
    for c0 in range(0, cols, bc):
        acc = np.zeros((bc, h, w, n), np.int64)
        for block in sorted((b for b in csb.blocks() if b.col == c0 // bc), key=lambda b: b.row):
            acc = run_pe(spec, Op.EB, index=block.index, weights=block.values, dy=pad(DY[block.row * br:][:br], br),
                         acc=acc).reshape(acc.shape)
        dx[c0:c0 + bc] = acc[:min(bc, cols - c0)]
    got = backward_error(csb, dy, spec=spec)
    assert np.array_equal(got, dx.transpose(3, 0, 1, 2).reshape(got.shape))
    # WG: every block once, G chained from zero
    grads = np.zeros((csb.nnz, k, k), np.int64)
    for block in csb.blocks():
        if block.nnz:
            grads[block.entries] = run_pe(spec, Op.WG, index=block.index, x=pad(X[block.col * bc:][:bc], bc),
                                          dy=pad(DY[block.row * br:][:br], br),
                                          grads=grads[block.entries]).reshape(block.nnz, k, k)
    assert np.array_equal(weight_grad(csb, x, dy, spec=spec), grads)


def test_updates_are_topped_up_to_the_target():
    spec = CsbSpec(block_rows=2, block_cols=3, kernel=3, out_h=2, out_w=3, batch=2, parallel=4, acc_bits=16)
    base = build_transactions(spec, count=4, seed=5)
    topped = top_up_updates(spec, base, target=10_000, seed=5)
    assert topped[:len(base)] == base
    assert count_macs(spec, topped)["upd"] >= 10_000 > count_macs(spec, topped[:-1])["upd"]
    for words_in, words_out in topped[len(base):]:
        assert int(words_in[0]) & 3 == 3 and int(words_in[0]) >> 16 & 0x1FF == spec.capacity
        assert int(words_out[0]) == 0
    assert top_up_updates(spec, topped, target=10_000, seed=5) == topped


@pytest.mark.slow  # 9 s
def test_verification_stimulus_reaches_ten_thousand_operations_per_op():
    from codesign.pe import get_pe

    pe = get_pe("csb")
    for case in pe.verification_grid():
        spec = replace(case.spec, stream_bits=32)  # a wide point's set is this one's as beats
        macs = count_macs(spec, pe.build_stimulus(spec, pe.stimulus_options()))
        assert min(macs["fp"], macs["eb"], macs["wg"], macs["upd"]) >= 10_000, (case.id, macs)
