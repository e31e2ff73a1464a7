"""Golden CSB model against independent oracles.

Block operations: plain Python loops written from docs/csb.md (saturating
cases included). Layers: float64 numpy/torch matmul and convolutions where
nothing saturates, plain loops over the dense matrix in the contract's order
where it does. The weight update: exact Fractions with Python's
round-half-even, and a real SGD step through the compressed-training technique.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from codesign.pe.csb.format import encode
from codesign.pe.csb.golden import (
    backward_error,
    block_eb,
    block_fp,
    block_upd,
    block_wg,
    forward,
    round_into_buffer,
    split_dyadic,
    update_shift,
    weight_grad,
    weight_update,
)
from codesign.pe.csb.spec import CsbSpec
from codesign.train.techniques.compress import MsbWeightQuantizer


def sat(value: int, bits: int) -> int:
    return max(-(1 << (bits - 1)), min((1 << (bits - 1)) - 1, value))


# -- plain oracles, straight from the contract -------------------------------------------------------

def oracle_fp(spec, ys, xs, w, X, acc):
    acc = acc.astype(object).copy()
    k = spec.kernel
    for e in range(len(ys)):
        for t in range(k * k):
            ky, kx = divmod(t, k)
            for oy in range(spec.out_h):
                for ox in range(spec.out_w):
                    for lane in range(spec.batch):
                        acc[ys[e], oy, ox, lane] = sat(acc[ys[e], oy, ox, lane]
                                                       + int(w[e, ky, kx]) * int(X[xs[e], oy + ky, ox + kx, lane]),
                                                       spec.acc_bits)
    return acc


def oracle_eb(spec, ys, xs, w, DY, acc):
    acc = acc.astype(object).copy()
    k = spec.kernel
    for iy in range(spec.in_h):
        for ix in range(spec.in_w):
            for e in range(len(ys)):
                for t in range(k * k):
                    ky, kx = divmod(t, k)
                    oy, ox = iy - ky, ix - kx
                    if 0 <= oy < spec.out_h and 0 <= ox < spec.out_w:
                        for lane in range(spec.batch):
                            acc[xs[e], iy, ix, lane] = sat(acc[xs[e], iy, ix, lane]
                                                           + int(w[e, ky, kx]) * int(DY[ys[e], oy, ox, lane]),
                                                           spec.acc_bits)
    return acc


def oracle_wg(spec, ys, xs, X, DY, G):
    G = G.astype(object).copy()
    k, P = spec.kernel, spec.parallel
    for e in range(len(ys)):
        for t in range(k * k):
            ky, kx = divmod(t, k)
            part = [0] * P
            for opos in range(spec.out_pos):
                oy, ox = divmod(opos, spec.out_w)
                total = sum(int(X[xs[e], oy + ky, ox + kx, lane]) * int(DY[ys[e], oy, ox, lane])
                            for lane in range(spec.batch))
                part[opos % P] = sat(part[opos % P] + total, spec.acc_bits)
            for p in range(P):
                G[e, ky, kx] = sat(G[e, ky, kx] + part[p], spec.acc_bits)
    return G


def oracle_upd(b: int, g: int, shift: int, bits: int = 24) -> int:
    return sat(round(Fraction(b * 2**shift - g, 2**shift)), bits)  # round() on a Fraction: half to even


SPECS = [
    CsbSpec(block_rows=3, block_cols=4, kernel=3, out_h=3, out_w=2, batch=2, parallel=4, acc_bits=16),
    CsbSpec(block_rows=5, block_cols=2, kernel=2, out_h=3, out_w=3, batch=3, parallel=2, acc_bits=17),
    CsbSpec(block_rows=16, block_cols=16, kernel=1, out_h=1, out_w=1, batch=4, parallel=1, acc_bits=16),
    CsbSpec(block_rows=2, block_cols=2, kernel=1, out_h=4, out_w=3, batch=1, parallel=3, acc_bits=32),
]


def random_block(spec, rng, near=False):
    nnz = int(rng.integers(0, spec.capacity + 1))
    cells = rng.permutation(spec.capacity)[:nnz]  # any stored order
    ys, xs = cells // spec.block_cols, cells % spec.block_cols
    k = spec.kernel
    w = rng.integers(-128, 128, (nnz, k, k))
    X = rng.integers(-128, 128, (spec.block_cols, spec.in_h, spec.in_w, spec.batch))
    DY = rng.integers(-128, 128, (spec.block_rows, spec.out_h, spec.out_w, spec.batch))

    def acc(shape):
        if near:  # within a few products of either end
            low = rng.random(shape) < 0.5
            offset = rng.integers(0, 1 << 14, shape)
            return np.where(low, spec.acc_min + offset, spec.acc_max - offset)
        return rng.integers(spec.acc_min, spec.acc_max + 1, shape)
    return ys, xs, w, X, DY, acc


@pytest.mark.parametrize("index", range(len(SPECS)))
@pytest.mark.parametrize("near", [False, True])
def test_block_operations_against_plain_loops(index, near):
    spec = SPECS[index]
    rng = np.random.default_rng(100 * index + near)
    for _ in range(4):
        ys, xs, w, X, DY, acc = random_block(spec, rng, near)
        a_fp = acc((spec.block_rows, spec.out_h, spec.out_w, spec.batch))
        assert np.array_equal(block_fp(spec, ys, xs, w, X, a_fp), oracle_fp(spec, ys, xs, w, X, a_fp))
        a_eb = acc((spec.block_cols, spec.in_h, spec.in_w, spec.batch))
        assert np.array_equal(block_eb(spec, ys, xs, w, DY, a_eb), oracle_eb(spec, ys, xs, w, DY, a_eb))
        g = acc((len(ys), spec.kernel, spec.kernel))
        assert np.array_equal(block_wg(spec, ys, xs, X, DY, g), oracle_wg(spec, ys, xs, X, DY, g))


def test_saturation_order_is_visible_in_fp():
    spec = CsbSpec(block_rows=1, block_cols=2, batch=1, acc_bits=16)
    X = np.full((2, 1, 1, 1), 127)
    # 32000 + 127*127 saturates to 32767 first, then -127*127: 16638, not 32000
    assert block_fp(spec, [0, 0], [0, 1], np.array([127, -127]).reshape(2, 1, 1), X,
                    np.full((1, 1, 1, 1), 32000)).item() == 32767 - 127 * 127
    # the other stored order: 32000 - 16129 + 16129 = 32000
    assert block_fp(spec, [0, 0], [1, 0], np.array([-127, 127]).reshape(2, 1, 1), X,
                    np.full((1, 1, 1, 1), 32000)).item() == 32000


def test_wg_depends_on_parallel_only_through_saturation():
    base = dict(block_rows=1, block_cols=1, kernel=1, out_h=2, out_w=2, batch=1, acc_bits=16)
    X = np.full((1, 2, 2, 1), 127)
    DY = np.array([127, 127, -128, -128]).reshape(1, 2, 2, 1)  # +16129, +16129, -16256, -16256
    G = np.zeros((1, 1, 1), dtype=np.int64)
    one = block_wg(CsbSpec(**base, parallel=1), [0], [0], X, DY, G).item()
    two = block_wg(CsbSpec(**base, parallel=2), [0], [0], X, DY, G).item()
    # P=1: 16129, 32258, 16002, -254.  P=2: parts 16129-16256 = -127 each, G = -254.  Equal: nothing saturated.
    assert one == two == -254
    DY = np.array([127, 127, 127, -128]).reshape(1, 2, 2, 1)
    one = block_wg(CsbSpec(**base, parallel=1), [0], [0], X, DY, G).item()
    two = block_wg(CsbSpec(**base, parallel=2), [0], [0], X, DY, G).item()
    assert one == sat(sat(sat(16129 * 2, 16) + 16129, 16) - 16256, 16) == 32767 - 16256
    assert two == sat(sat(16129 + 16129, 16) + sat(16129 - 16256, 16), 16) == 32258 - 127
    assert one != two


def test_weight_update_against_fractions():
    rng = np.random.default_rng(3)
    b = rng.integers(-(1 << 23), 1 << 23, 4000)
    b[:400] = np.where(rng.random(400) < 0.5, (1 << 23) - 1, -(1 << 23))
    for shift in (0, 1, 2, 5, 16, 30, 31):
        half = (1 << shift) >> 1
        g = rng.integers(-(1 << 31), 1 << 31, b.size)
        g[::3] = np.clip(rng.integers(-8, 8, g[::3].size) * (1 << shift) + half, -(1 << 31), (1 << 31) - 1)  # ties
        got = weight_update(b, g, shift)
        want = [oracle_upd(int(x), int(y), shift) for x, y in zip(b, g)]
        assert got.tolist() == want


def test_weight_update_by_hand():
    assert weight_update(np.array([0, 1, 2, 3]), np.array([-1, -1, -1, -1]), 1).tolist() == [0, 2, 2, 4]  # x.5 to even
    assert weight_update(np.array([0, 0]), np.array([3, -3]), 2).tolist() == [-1, 1]  # -0.75, 0.75
    assert weight_update(np.array([(1 << 23) - 1, -(1 << 23)]), np.array([-5, 5]), 0).tolist() == [(1 << 23) - 1,
                                                                                                   -(1 << 23)]
    assert weight_update(np.array([7]), np.array([(1 << 31) - 1]), 31).tolist() == [6]  # 7 - (1 - 2^-31)
    assert weight_update(np.array([100]), np.array([-(1 << 31)]), 31).tolist() == [101]
    assert weight_update(np.array([5]), np.array([20]), 3, buffer_bits=16).tolist() == [2]  # 5 - 2.5 -> 2


def test_block_upd_shape_and_errors():
    spec = CsbSpec(block_rows=2, block_cols=2, kernel=2)
    b = np.arange(8).reshape(2, 2, 2)
    assert np.array_equal(block_upd(spec, b, np.zeros_like(b), 4), b)
    with pytest.raises(ValueError, match="shape"):
        block_upd(spec, b.reshape(2, 4), b.reshape(2, 4), 0)
    with pytest.raises(ValueError, match="shift"):
        block_upd(spec, b, b, 32)
    with pytest.raises(ValueError, match="buffer_codes"):
        block_upd(spec, b + (1 << 23), b, 0)
    with pytest.raises(ValueError, match="grad_codes"):
        block_upd(spec, b, b + (1 << 31), 0)
    with pytest.raises(ValueError, match="differ"):
        weight_update(b, b[:1], 0)


def test_round_into_buffer_with_per_element_shifts():
    num = np.array([5, -5, 6, 7, -7, 3, 1 << 52, -(1 << 52)])
    shift = np.array([1, 1, 2, 0, 3, 62, 30, 30])
    want = [oracle_upd(0, -int(n), int(s)) for n, s in zip(num, shift)]
    assert round_into_buffer(num, shift).tolist() == want
    with pytest.raises(ValueError, match="shift"):
        round_into_buffer(num, 63)


def test_split_dyadic_is_exact():
    rng = np.random.default_rng(9)
    values = np.concatenate([rng.normal(size=500) * 2.0 ** rng.integers(-40, 30, 500), [0.0, 1.5, -2.0**-60, 2.0**39]])
    numerator, shift = split_dyadic(values)
    for v, n, s in zip(values, numerator, shift):
        if abs(v) >= 2.0**-9:  # smaller ones may have their shift clamped: they round to 0 regardless
            assert Fraction(int(n), 2 ** int(s)) == Fraction(float(v))
    numerator, shift = split_dyadic(np.array([1e30, -np.inf]))
    assert numerator.tolist() == [1 << 52, -(1 << 52)] and shift.tolist() == [12, 12]  # clamped to +-2^40


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_sgd_step_through_the_technique_equals_weight_update(dtype):
    """w' = w - 2^-m * grad, rounded into the buffer by MsbWeightQuantizer.store == UPD on the integer codes."""
    rng = np.random.default_rng(17)
    # weights with 2^-2 steps (buffer 2^-18), gradient codes g with 2^-8 steps, learning rate 2^-16:
    # the step -g * 2^-24 is -g * 2^-6 buffer steps, i.e. UPD with shift 6
    frac_bits, grad_frac, m = 2, 8, 16
    quantizer = MsbWeightQuantizer(8, frac_bits, buffer_bits=24)
    buffer_frac = quantizer.buffer_format.frac_bits
    shift = update_shift(learning_rate=2.0**-m, grad_frac_bits=grad_frac, buffer_frac_bits=buffer_frac)
    assert shift == grad_frac + m - buffer_frac == 6
    n = 3000
    b = rng.integers(-(1 << 23), 1 << 23, n)
    b[:50] = (1 << 23) - 1 - rng.integers(0, 3, 50)
    g_limit = 1 << (17 if dtype == torch.float64 else 8)  # float32 holds the exact sum for small steps only
    if dtype == torch.float32:
        b = rng.integers(-(1 << 16), 1 << 16, n)
    g = rng.integers(-g_limit, g_limit, n)
    g[::4] = rng.integers(-20, 20, g[::4].size) * (1 << shift) + (1 << (shift - 1))  # ties
    g[:50] = -g_limit
    weight = torch.nn.Parameter(torch.tensor(np.ldexp(b.astype(np.float64), -buffer_frac), dtype=dtype))
    weight.grad = torch.tensor(np.ldexp(g.astype(np.float64), -grad_frac), dtype=dtype)
    torch.optim.SGD([weight], lr=2.0**-m).step()
    codes = np.ldexp(quantizer.store(weight).detach().numpy().astype(np.float64), buffer_frac)
    assert np.array_equal(codes, weight_update(b, g, shift).astype(np.float64))
    assert codes.tolist() == [oracle_upd(int(x), int(y), shift) for x, y in zip(b, g)]


# -- layers ---------------------------------------------------------------------------------------------

def sparse(rng, shape, density=0.5):
    dense = rng.integers(-128, 128, size=shape)
    keep = rng.random(shape[:2]) < density
    return np.where(keep.reshape(*shape[:2], *([1] * (len(shape) - 2))), dense, 0)


@pytest.mark.parametrize("seed", range(4))
def test_fc_layer_against_numpy(seed):
    rng = np.random.default_rng(seed)
    rows, cols, n = (int(v) for v in rng.integers(1, 40, 3))
    dense = sparse(rng, (rows, cols))
    csb = encode(dense, block_rows=int(rng.integers(1, 17)), block_cols=int(rng.integers(1, 17)))
    x = rng.integers(-128, 128, (n, cols))
    dy = rng.integers(-128, 128, (n, rows))
    W = dense.astype(np.float64)
    y = forward(csb, x)
    assert y.dtype == np.int32 and y.shape == (n, rows)
    assert np.array_equal(y, x.astype(np.float64) @ W.T)
    assert np.array_equal(backward_error(csb, dy), dy.astype(np.float64) @ W)
    r, c = np.nonzero(dense)  # stored order is block-major, so compare through the entry coordinates
    rows_of, cols_of = csb.entry_coordinates()
    grad = weight_grad(csb, x, dy)
    assert grad.shape == (csb.nnz, 1, 1)
    assert np.array_equal(grad[:, 0, 0], (dy.astype(np.float64).T @ x)[rows_of, cols_of])
    assert sorted(zip(rows_of.tolist(), cols_of.tolist())) == sorted(zip(r.tolist(), c.tolist()))
    view = csb.transpose_view()  # the transposed matrix as a layer of its own
    assert np.array_equal(forward(view, dy), dy.astype(np.float64) @ W)
    assert np.array_equal(backward_error(view, x), x.astype(np.float64) @ W.T)


@pytest.mark.parametrize("seed", range(4))
def test_conv_layer_against_torch(seed):
    rng = np.random.default_rng(10 + seed)
    rows, cols = (int(v) for v in rng.integers(1, 12, 2))
    k = int(rng.integers(1, 5))
    n, h, w = int(rng.integers(1, 20)), int(rng.integers(k, k + 6)), int(rng.integers(k, k + 6))
    dense = sparse(rng, (rows, cols, k, k))
    csb = encode(dense, block_rows=int(rng.integers(1, 6)), block_cols=int(rng.integers(1, 6)))
    x = rng.integers(-128, 128, (n, cols, h, w))
    dy = rng.integers(-128, 128, (n, rows, h - k + 1, w - k + 1))
    W, X, DY = (torch.tensor(a, dtype=torch.float64) for a in (dense, x, dy))
    y = forward(csb, x)
    assert y.dtype == np.int32
    assert np.array_equal(y, F.conv2d(X, W).numpy())
    assert np.array_equal(backward_error(csb, dy), F.conv_transpose2d(DY, W).numpy())
    Wg = W.clone().requires_grad_(True)
    F.conv2d(X, Wg).backward(DY)
    rows_of, cols_of = csb.entry_coordinates()
    assert np.array_equal(weight_grad(csb, x, dy), Wg.grad.numpy()[rows_of, cols_of])
    # a spec with P groups and fewer lanes than samples gives the same results when nothing saturates
    spec = CsbSpec(block_rows=csb.block_rows, block_cols=csb.block_cols, kernel=k, out_h=h - k + 1, out_w=w - k + 1,
                   batch=3, parallel=4, acc_bits=32)
    assert np.array_equal(weight_grad(csb, x, dy, spec=spec), Wg.grad.numpy()[rows_of, cols_of])
    assert np.array_equal(forward(csb, x, spec=spec), y)


def fc_oracles(dense, x, dy, bits, lanes):
    """FC layer schedules by hand. For an FC layer every accumulator sees its entries in ascending input (FP) or
    output (EB) index: blocks in (transposed) row-major order, entries row-major inside a block. WG: one
    transaction per lane chunk, the lane sum saturated into the single P-group partial, then into G."""
    rows, cols = dense.shape
    y = [[0] * rows for _ in range(len(x))]
    dx = [[0] * cols for _ in range(len(x))]
    for s in range(len(x)):
        for r in range(rows):
            for c in range(cols):
                if dense[r, c]:
                    y[s][r] = sat(y[s][r] + int(dense[r, c]) * int(x[s, c]), bits)
        for c in range(cols):
            for r in range(rows):
                if dense[r, c]:
                    dx[s][c] = sat(dx[s][c] + int(dense[r, c]) * int(dy[s, r]), bits)
    grads = {}
    for r, c in zip(*np.nonzero(dense)):
        g = 0
        for lo in range(0, len(x), lanes):
            g = sat(g + sat(sum(int(x[s, c]) * int(dy[s, r]) for s in range(lo, min(lo + lanes, len(x)))), bits), bits)
        grads[r, c] = g
    return np.array(y), np.array(dx), grads


@pytest.mark.parametrize("seed", range(3))
def test_saturating_fc_layer_against_plain_loops(seed):
    rng = np.random.default_rng(20 + seed)
    rows, cols, n = 9, 23, 19
    dense = sparse(rng, (rows, cols), 0.7)
    dense[dense != 0] = np.where(rng.random(np.count_nonzero(dense)) < 0.8, 127, -128)  # big products, mostly one sign
    csb = encode(dense, block_rows=4, block_cols=5)
    x = np.where(rng.random((n, cols)) < 0.8, 127, -128)
    dy = np.where(rng.random((n, rows)) < 0.8, 127, -128)
    spec = CsbSpec(block_rows=4, block_cols=5, batch=7, acc_bits=16)
    y, dx, grads = fc_oracles(dense, x, dy, 16, 7)
    assert np.array_equal(forward(csb, x, spec=spec), y)
    assert np.array_equal(backward_error(csb, dy, spec=spec), dx)
    got = weight_grad(csb, x, dy, spec=spec)
    rows_of, cols_of = csb.entry_coordinates()
    assert [int(v) for v in got[:, 0, 0]] == [grads[r, c] for r, c in zip(rows_of, cols_of)]
    assert np.any(np.abs(y) == 32767) or np.any(y == -32768)  # the case does saturate
    # FC: EB is FP on the transposed view, even when it saturates
    assert np.array_equal(backward_error(csb, dy, acc_bits=16), forward(csb.transpose_view(), dy, acc_bits=16))


def test_layer_input_errors():
    csb = encode(np.eye(4, dtype=np.int8), 2)
    x = np.ones((3, 4), dtype=np.int64)
    with pytest.raises(ValueError, match="channels"):
        forward(csb, np.ones((3, 5), dtype=np.int64))
    with pytest.raises(ValueError, match="integer"):
        forward(csb, x.astype(np.float32))
    with pytest.raises(ValueError, match="8-bit"):
        forward(csb, x * 128)
    with pytest.raises(ValueError, match="block_rows"):
        forward(csb, x, spec=CsbSpec(block_rows=4, block_cols=2))
    with pytest.raises(ValueError, match="out_h"):
        forward(csb, x, spec=CsbSpec(block_rows=2, block_cols=2, out_h=2))
    with pytest.raises(ValueError, match="contradicts"):
        forward(csb, x, spec=CsbSpec(block_rows=2, block_cols=2), acc_bits=16)
    with pytest.raises(ValueError, match="acc_bits"):
        forward(csb, x, acc_bits=40)
    with pytest.raises(ValueError, match="samples"):
        weight_grad(csb, x, np.ones((2, 4), dtype=np.int64))
    conv = encode(np.ones((2, 2, 3, 3), dtype=np.int8))
    with pytest.raises(ValueError, match="kernel"):
        forward(conv, np.ones((1, 2, 2, 5), dtype=np.int64))
    with pytest.raises(ValueError, match="channel buffer"):
        forward(conv, np.ones((1, 2, 40, 40), dtype=np.int64))  # one tile must fit the PE
    with pytest.raises(ValueError, match="channels"):
        forward(conv, np.ones((1, 2, 5), dtype=np.int64))


def test_block_input_errors():
    spec = CsbSpec(block_rows=2, block_cols=3, kernel=1, batch=1)
    w = np.ones((1, 1, 1), dtype=np.int64)
    X = np.zeros((3, 1, 1, 1), dtype=np.int64)
    acc = np.zeros((2, 1, 1, 1), dtype=np.int64)
    assert block_fp(spec, [1], [2], w, X, acc).shape == acc.shape
    with pytest.raises(ValueError, match="outside"):
        block_fp(spec, [2], [0], w, X, acc)
    with pytest.raises(ValueError, match="outside"):
        block_fp(spec, [0], [3], w, X, acc)
    with pytest.raises(ValueError, match="capacity"):
        block_wg(spec, np.zeros(7, int), np.zeros(7, int), X, acc, np.zeros((7, 1, 1), int))
    with pytest.raises(ValueError, match="shape"):
        block_fp(spec, [0], [0], w, X[:2], acc)
    with pytest.raises(ValueError, match="16-bit|32-bit"):
        block_eb(spec, [0], [0], w, acc, X + (1 << 31))
    with pytest.raises(ValueError, match="8-bit"):
        block_fp(spec, [0], [0], w * 200, X, acc)
    with pytest.raises(ValueError, match="equal-length"):
        block_fp(spec, [0, 1], [0], w, X, acc)


@pytest.mark.parametrize("rate, match", [(0.3, "not a power of two"), (3 * 2.0**-10, "not a power of two"),
                                         (0.0, "positive"), (float("nan"), "positive"), (-0.5, "positive"),
                                         (2.0**-50, "outside"), (4.0, "outside")])
def test_update_shift_refuses_scales_the_pe_cannot_apply(rate, match):
    with pytest.raises(ValueError, match=match):
        update_shift(learning_rate=rate, grad_frac_bits=8, buffer_frac_bits=18)


@pytest.mark.parametrize("seed", range(4))
def test_stride_two_conv_layer_against_torch(seed):
    """Stride 2 (header S2): FP, EB and WG of a layer equal torch's strided convolution and its gradients; maps
    with a row or column past the last window (an even map at an odd kernel) are cropped as torch crops them."""
    rng = np.random.default_rng(40 + seed)
    rows, cols = (int(v) for v in rng.integers(1, 10, 2))
    k = int(rng.integers(1, 4))
    n, h, w = int(rng.integers(1, 12)), int(rng.integers(k, k + 7)), int(rng.integers(k, k + 7))
    dense = sparse(rng, (rows, cols, k, k))
    csb = encode(dense, block_rows=int(rng.integers(1, 6)), block_cols=int(rng.integers(1, 6)))
    x = rng.integers(-128, 128, (n, cols, h, w))
    oh, ow = (h - k) // 2 + 1, (w - k) // 2 + 1
    dy = rng.integers(-128, 128, (n, rows, oh, ow))
    W, X, DY = (torch.tensor(a, dtype=torch.float64) for a in (dense, x, dy))
    assert np.array_equal(forward(csb, x, stride=2), F.conv2d(X, W, stride=2).numpy())
    in_h, in_w = 2 * (oh - 1) + k, 2 * (ow - 1) + k
    dx = F.conv_transpose2d(DY, W, stride=2).numpy()
    assert dx.shape[2:] == (in_h, in_w)
    assert np.array_equal(backward_error(csb, dy, stride=2), dx)
    Wg = W.clone().requires_grad_(True)
    F.conv2d(X, Wg, stride=2).backward(DY)
    rows_of, cols_of = csb.entry_coordinates()
    assert np.array_equal(weight_grad(csb, x, dy, stride=2), Wg.grad.numpy()[rows_of, cols_of])
    spec = CsbSpec(block_rows=csb.block_rows, block_cols=csb.block_cols, kernel=k, out_h=oh, out_w=ow, batch=3,
                   parallel=3, acc_bits=32, max_stride=2)
    assert np.array_equal(weight_grad(csb, x, dy, spec=spec, stride=2), Wg.grad.numpy()[rows_of, cols_of])
    with pytest.raises(ValueError, match="runs strides 1..1"):
        forward(csb, x, spec=CsbSpec(**{**spec.to_dict(), "max_stride": 1}), stride=2)
    with pytest.raises(ValueError, match="stride must be 1 or 2"):
        forward(csb, x, stride=3)
