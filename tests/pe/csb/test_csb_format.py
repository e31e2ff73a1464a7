"""CSB storage: encode/to_dense round trips, the stored order by hand, the transposed view, the DRAM image."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from codesign.pe.csb.format import CSBMatrix, encode

# 3 x 5 with blocks of 2 x 2: block grid 2 x 3, last block row and column partial
HAND = np.array([[0, 1, 0, 0, 2],
                 [3, 0, 0, 4, 0],
                 [0, 0, 5, 0, -6]])


def random_sparse(rng, shape, density=0.4):
    dense = rng.integers(-128, 128, size=shape)
    keep = rng.random(shape[:2]) < density
    return np.where(keep.reshape(*shape[:2], *([1] * (len(shape) - 2))), dense, 0)


def test_stored_order_by_hand():
    csb = encode(HAND, 2)
    assert csb.block_grid == (2, 3) and csb.nnz == 6
    # blocks row-major: (0,0) holds 1 at (0,1) and 3 at (1,0); (0,1) holds 4 at (1,1); (0,2) holds 2 at (0,0);
    # (1,0) empty; (1,1) holds 5 at (0,0); (1,2) holds -6 at (0,0)
    assert list(csb.block_ptr) == [0, 2, 3, 4, 4, 5, 6]
    assert list(csb.index) == [0x01, 0x10, 0x11, 0x00, 0x00, 0x00]
    assert list(csb.values.reshape(-1)) == [1, 3, 4, 2, 5, -6]
    assert csb.index.dtype == np.uint8 and csb.values.dtype == np.int8 and csb.values.shape == (6, 1, 1)


def test_rectangular_blocks_and_index_nibbles():
    dense = np.zeros((20, 40), dtype=np.int8)
    dense[19, 39] = 7
    dense[5, 17] = -1
    csb = encode(dense, block_rows=16, block_cols=16)
    assert csb.block_grid == (2, 3)
    assert list(csb.index) == [0x51, 0x37]  # (5, 17): block (0, 1), y 5 x 1; (19, 39): block (1, 2), y 3 x 7
    assert csb.block_ptr[1:].tolist() == [0, 1, 1, 1, 1, 2]
    csb = encode(dense, 4, block_cols=16)
    assert (csb.block_rows, csb.block_cols) == (4, 16)


def test_conv_entry_is_stored_when_any_tap_is_nonzero():
    dense = np.zeros((2, 3, 3, 3), dtype=np.int16)
    dense[1, 2, 2, 0] = -128
    dense[0, 0] = 127
    csb = encode(dense, 16)
    assert csb.conv and csb.kernel == 3 and csb.nnz == 2
    assert list(csb.index) == [0x00, 0x12]
    assert np.array_equal(csb.values[1], dense[1, 2])
    assert np.array_equal(csb.to_dense(), dense)


@pytest.mark.parametrize("seed", range(12))
def test_round_trip_random(seed):
    rng = np.random.default_rng(seed)
    rows, cols = (int(v) for v in rng.integers(1, 40, size=2))
    k = int(rng.integers(1, 8))
    shape = (rows, cols) if seed % 2 else (rows, cols, k, k)
    dense = random_sparse(rng, shape, density=float(rng.random()))
    br, bc = (int(v) for v in rng.integers(1, 17, size=2))
    csb = encode(dense, block_rows=br, block_cols=bc)
    back = csb.to_dense()
    assert back.dtype == np.int8 and back.shape == dense.shape
    assert np.array_equal(back, dense)
    assert csb.nnz == int(np.count_nonzero(np.any(dense.reshape(rows, cols, -1) != 0, axis=2)))


@settings(max_examples=60, deadline=None)
@given(arrays(np.int8, st.tuples(st.integers(1, 20), st.integers(1, 20)),
              elements=st.sampled_from([0, 0, 0, 1, -1, 127, -128])), st.integers(1, 16), st.integers(1, 16))
def test_round_trip_hypothesis(dense, br, bc):
    csb = encode(dense, block_rows=br, block_cols=bc)
    assert np.array_equal(csb.to_dense(), dense)
    assert np.array_equal(csb.transpose_view().to_dense(), dense.T)
    assert np.array_equal(CSBMatrix.from_stream(csb.to_stream()).to_dense(), dense)


def dense_from_blocks(view: CSBMatrix) -> np.ndarray:
    """Rebuild the view's dense matrix from blocks() alone (block coordinates times the view's block size)."""
    k = view.kernel
    out = np.zeros((*view.view_shape, k, k), dtype=np.int64)
    br, bc = view.view_block
    for block in view.blocks():
        for y, x, v in zip(block.ys, block.xs, block.values):
            out[block.row * br + y, block.col * bc + x] = v
    return out


@pytest.mark.parametrize("conv", [False, True])
def test_transpose_view_shares_the_arrays(conv):
    rng = np.random.default_rng(5)
    dense = random_sparse(rng, (13, 21, 3, 3) if conv else (13, 21))
    csb = encode(dense, block_rows=4, block_cols=5)
    view = csb.transpose_view()
    assert view.transposed and view.view_shape == (21, 13) and view.view_block == (5, 4)
    for name in ("block_ptr", "index", "values"):
        assert np.shares_memory(getattr(view, name), getattr(csb, name))
    assert np.array_equal(view.to_dense(), dense.swapaxes(0, 1))  # kernels unchanged
    again = view.transpose_view()
    assert not again.transposed and np.array_equal(again.to_dense(), dense)
    assert np.shares_memory(again.values, csb.values)
    full = dense if conv else dense[:, :, None, None]
    assert np.array_equal(dense_from_blocks(csb), full)
    assert np.array_equal(dense_from_blocks(view), full.swapaxes(0, 1))


def test_transposed_blocks_come_in_column_major_order_with_x_and_y_exchanged():
    csb = encode(HAND, 2)
    order = [(b.row, b.col) for b in csb.blocks()]
    assert order == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    blocks = list(csb.transpose_view().blocks())
    # view block (r, c) is stored block (c, r); stored blocks visited column-major
    assert [(b.row, b.col) for b in blocks] == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]
    first = blocks[0]  # stored block (0, 0): entries (0,1)=1 and (1,0)=3, read as (1,0) and (0,1)
    assert list(first.ys) == [1, 0] and list(first.xs) == [0, 1] and list(first.index) == [0x01, 0x10]
    assert list(first.values.reshape(-1)) == [1, 3]


def test_arrays_are_read_only():
    csb = encode(HAND, 2)
    with pytest.raises(ValueError):
        csb.values[0, 0, 0] = 9
    with pytest.raises(ValueError):
        csb.transpose_view().index[0] = 0


@pytest.mark.parametrize("conv", [False, True])
@pytest.mark.parametrize("transposed", [False, True])
def test_dram_image_round_trip(conv, transposed):
    rng = np.random.default_rng(11)
    dense = random_sparse(rng, (9, 7, 2, 2) if conv else (9, 7))
    csb = encode(dense, block_rows=4, block_cols=3)
    csb = csb.transpose_view() if transposed else csb
    words = csb.to_stream()
    assert words.dtype == np.uint32
    back = CSBMatrix.from_stream(words)
    assert back.transposed == transposed and back.conv == conv
    assert np.array_equal(back.to_dense(), csb.to_dense())
    assert np.array_equal(back.index, csb.index) and np.array_equal(back.block_ptr, csb.block_ptr)


def test_dram_image_layout_by_hand():
    csb = encode(HAND, 2)
    words = csb.to_stream()
    assert words[0] == 3 | 5 << 16
    assert words[1] == 1 | 2 << 8 | 2 << 16
    assert list(words[2:8]) == [2, 1, 1, 0, 1, 1]
    # block (0,0): index bytes 0x01 0x10 in one word, values 1 3 in one word
    assert list(words[8:10]) == [0x1001, 0x0301]
    assert words[-1] == 0xFA  # the last value -6, one byte


def test_dram_image_errors():
    words = encode(HAND, 2).to_stream()
    for cut in range(words.size):
        with pytest.raises(ValueError, match="truncated"):
            CSBMatrix.from_stream(words[:cut])
    with pytest.raises(ValueError, match="beyond"):
        CSBMatrix.from_stream(np.append(words, np.uint32(0)))
    bad = words.copy()
    bad[1] |= 1 << 30
    with pytest.raises(ValueError, match="reserved"):
        CSBMatrix.from_stream(bad)
    bad = words.copy()
    bad[2] = 5  # 5 entries in a 2 x 2 block
    with pytest.raises(ValueError, match="capacity"):
        CSBMatrix.from_stream(bad)
    bad = words.copy()
    bad[8] = 0x1002  # x = 2 in a 2-wide block
    with pytest.raises(ValueError, match="outside"):
        CSBMatrix.from_stream(bad)
    bad = words.copy()
    bad[8] = 0x0110  # not row-major
    with pytest.raises(ValueError, match="row-major"):
        CSBMatrix.from_stream(bad)
    bad = words.copy()
    bad[1] = 0 | 2 << 8 | 2 << 16
    with pytest.raises(ValueError, match="kernel"):
        CSBMatrix.from_stream(bad)
    with pytest.raises(ValueError, match="word is outside"):
        CSBMatrix.from_stream(np.array([-1, 0]))


@pytest.mark.parametrize("kwargs", [dict(block=17), dict(block=0), dict(block_rows=17), dict(block_cols=0)])
def test_encode_refuses_bad_blocks(kwargs):
    with pytest.raises(ValueError, match="block"):
        encode(HAND, **kwargs)


def test_encode_refuses_bad_dense():
    with pytest.raises(ValueError, match="integer"):
        encode(HAND.astype(np.float32))
    with pytest.raises(ValueError, match="integer"):
        encode(HAND != 0)
    with pytest.raises(ValueError, match="int8"):
        encode(HAND * 100)
    with pytest.raises(ValueError, match="int8"):
        encode(np.array([[-129]]))
    with pytest.raises(ValueError, match="shape"):
        encode(np.zeros((2, 2, 2), dtype=np.int8))
    with pytest.raises(ValueError, match="square"):
        encode(np.zeros((2, 2, 3, 2), dtype=np.int8))
    with pytest.raises(ValueError, match="square"):
        encode(np.zeros((2, 2, 8, 8), dtype=np.int8))
    with pytest.raises(TypeError):
        encode(HAND, 2.0)


def matrix(**changes):
    base = dict(shape=(3, 5), kernel=1, block_rows=2, block_cols=2, block_ptr=np.array([0, 2, 3, 4, 4, 5, 6]),
                index=np.array([0x01, 0x10, 0x11, 0x00, 0x00, 0x00], dtype=np.uint8),
                values=np.arange(1, 7, dtype=np.int8).reshape(6, 1, 1))
    return CSBMatrix(**(base | changes))


def test_constructor_validation():
    assert matrix().nnz == 6
    with pytest.raises(ValueError, match="outside"):  # y = 1 in the partial last block row (one row)
        matrix(index=np.array([0x01, 0x10, 0x11, 0x00, 0x10, 0x00], dtype=np.uint8))
    with pytest.raises(ValueError, match="outside"):  # x = 1 in the partial last block column (one column)
        matrix(index=np.array([0x01, 0x10, 0x11, 0x01, 0x00, 0x00], dtype=np.uint8))
    with pytest.raises(ValueError, match="never decrease"):
        matrix(block_ptr=np.array([0, 2, 1, 4, 4, 5, 6]))
    with pytest.raises(ValueError, match="start at 0"):
        matrix(block_ptr=np.array([1, 2, 3, 4, 4, 5, 6]))
    with pytest.raises(ValueError, match="block_ptr"):
        matrix(block_ptr=np.array([0, 2, 3, 4, 5, 6]))
    with pytest.raises(ValueError, match="row-major"):
        matrix(index=np.array([0x10, 0x01, 0x11, 0x00, 0x00, 0x00], dtype=np.uint8))
    with pytest.raises(ValueError, match="distinct"):
        matrix(index=np.array([0x01, 0x01, 0x11, 0x00, 0x00, 0x00], dtype=np.uint8))
    with pytest.raises(ValueError, match="index"):
        matrix(index=np.array([1, 16, 17, 0, 0, 0]))
    with pytest.raises(ValueError, match="values"):
        matrix(values=np.arange(6, dtype=np.int16).reshape(6, 1, 1))
    with pytest.raises(ValueError, match="kernel"):
        matrix(kernel=2, values=np.zeros((6, 2, 2), np.int8))
    with pytest.raises(ValueError, match="block_rows"):
        matrix(block_rows=17)
    with pytest.raises(TypeError, match="transposed"):
        matrix(transposed=1)
    with pytest.raises(ValueError, match="shape"):
        matrix(shape=[3, 5])
