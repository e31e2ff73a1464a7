"""One TT layer's training step as PE calls, equal bit for bit to the step the trainer's golden layer takes.

The layer is a :class:`~codesign.step.tt.layer_state.TtLayerState` (NumPy
cores, bias, precision and scale trackers), built by the trainer from its
TT layer, whose own step (training mode, low precision) is the expected
result. :func:`pe_step` computes that step from the schedule of
:mod:`codesign.step.tt.schedule`: every contraction on PE1/PE2 (through a
*runner*: the golden kernels, :class:`GoldenRunner`, or the generated HLS
C++, :class:`codesign.step.tt.csim.CsimRunner`), and between the calls
what the host of paper 003 (Sec. 4: the ARM core) does in integers: adding
partial sums of a cut contraction, choosing each tensor's power-of-two
scale from its mean |code| (Sec. 3.3), rounding accumulator words to the
next 8- or 16-bit codes (to nearest, ties to even, saturating), adding the
bias, summing the bias gradient and masking the input gradient
(clipped-ReLU straight-through estimator). :func:`compare_steps` counts the
values that differ between two steps.

Why the two agree: the golden layer computes sums of products of codes in
float64, exact at these widths; the schedule caps every call's summed length
so no PE accumulator saturates, and the host adds partial sums in 64 bits,
so every contraction is the same exact integer. Scale choice and rounding
are then the same function of the same integers; the scales of the float
inputs (batch, output gradient, bias, shadow cores) come from the one mean
|x| both sides take, :func:`codesign.numerics.scales.mean_abs`. Paper 003 fixes the
operand widths and power-of-two scales (Sec. 3.3) but no accumulator width
or overflow rule; both sides compute exact sums, so neither had to change.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from codesign.pe.tt import golden
from codesign.step.tt.layer_state import TRACKERS, TtLayerState
from codesign.step.tt.rounding import frac_of_values, quantize_values, to_values
from codesign.step.tt.scale_book import ScaleBook
from codesign.step.tt.schedule import Contraction, LayerGeometry, StepHardware, StepPlan, plan_step, stages


# ---------------------------------------------------------------------------- runners
class GoldenRunner:
    """Runs PE calls in the golden kernels (:func:`codesign.pe.tt.golden.kernel`)."""

    name = "golden"

    def __init__(self) -> None:
        self.calls = 0

    def run(self, hardware: StepHardware, calls: Sequence[tuple[str, np.ndarray, np.ndarray]]) -> list[np.ndarray]:
        self.calls += len(calls)
        return [golden.kernel(hardware.spec(pe), a, b) for pe, a, b in calls]


# ---------------------------------------------------------------------------- results
@dataclass
class StepResult:
    """What a training step of one layer produces (as the layer returns it) and its scales afterwards.

    ``y`` (B, M) layer output, ``grad_x`` (B, N) input gradient (None for a network input), both of the layer's
    hand-off type (float32, or float64 where it hands off exactly: :attr:`TtLayerState.hand_off_dtype`);
    ``core_grads`` the gradients of the shadow cores, ``bias_grad`` (both float32); ``trackers`` the fraction
    bits of every tracked tensor.
    """

    y: np.ndarray
    grad_x: np.ndarray | None
    core_grads: list[np.ndarray]
    bias_grad: np.ndarray | None
    trackers: dict[str, tuple[int, ...]]
    means: dict[str, tuple[float, ...]] = field(default_factory=dict)
    stats: dict = field(default_factory=dict)


def _bits(values: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values).view(f"u{np.asarray(values).dtype.itemsize}")


def compare_steps(expected: StepResult, got: StepResult) -> dict[str, int]:
    """Values (bit patterns, scale trackers) that differ, per output; shapes and float types must agree."""
    out = {}

    def count(name, a, b):
        if (a is None) != (b is None):
            raise ValueError(f"{name}: one step has it, the other not")
        if a is None:
            return
        if np.shape(a) != np.shape(b):
            raise ValueError(f"{name}: shapes {np.shape(a)} and {np.shape(b)} differ")
        if np.asarray(a).dtype != np.asarray(b).dtype:
            raise ValueError(f"{name}: types {np.asarray(a).dtype} and {np.asarray(b).dtype} differ")
        out[name] = int(np.count_nonzero(_bits(a) != _bits(b)))

    count("y", expected.y, got.y)
    count("grad_x", expected.grad_x, got.grad_x)
    count("bias_grad", expected.bias_grad, got.bias_grad)
    if len(expected.core_grads) != len(got.core_grads):
        raise ValueError(f"core_grads: {len(expected.core_grads)} and {len(got.core_grads)} cores")
    for k, (a, b) in enumerate(zip(expected.core_grads, got.core_grads)):
        count(f"core_grad[{k}]", a, b)
    for name in TRACKERS:
        if len(expected.trackers[name]) != len(got.trackers[name]):
            raise ValueError(f"scales.{name}: {len(expected.trackers[name])} and {len(got.trackers[name])} values")
        out[f"scales.{name}"] = sum(x != y for x, y in zip(expected.trackers[name], got.trackers[name]))
        if expected.means or got.means:  # running means by their float64 bits (one side without them: all differ)
            a, b = (np.asarray(r.means.get(name, ()), dtype=np.float64).view(np.uint64) for r in (expected, got))
            out[f"means.{name}"] = int(np.count_nonzero(a != b)) if a.shape == b.shape else max(a.size, b.size)
    return out


def checked_values(result: StepResult) -> int:
    """Values a comparison of ``result`` checks."""
    arrays = [result.y, result.grad_x, result.bias_grad, *result.core_grads]
    return sum(int(np.size(a)) for a in arrays if a is not None) + sum(len(v) for v in result.trackers.values())


# ---------------------------------------------------------------------------- checks
def check_layer(layer: TtLayerState) -> None:
    """Refuse a layer whose precision the PEs and the host cannot compute, before any call."""
    if not isinstance(layer, TtLayerState):
        raise TypeError(f"layer must be a TtLayerState, got {type(layer).__name__}")
    if not layer.quantize_intermediates:
        raise ValueError("precision.quantize_intermediates must be True: the PEs take codes, not wide sums")
    if layer.rounding != "nearest_even":
        raise ValueError(f"the host rounds to nearest, ties to even; precision.rounding is {layer.rounding!r}")
    if max(layer.activation_bits, layer.grad_bits, layer.core_bits) > 16:
        raise ValueError("the PEs take operands of at most 16 bits")


def _as_float(layer: TtLayerState, values) -> np.ndarray:
    """``values`` as float32, or kept in float64 where given so to a layer that hands off exactly (a layer below's
    output or gradient, :attr:`TtLayerState.hand_off_dtype`): a float32 batch is not widened, its values are the
    same."""
    values = np.asarray(values)
    return values if values.dtype in (np.float32, layer.hand_off_dtype) else values.astype(layer.hand_off_dtype)


def check_input(layer: TtLayerState, x) -> np.ndarray:
    """``x`` as a finite (batch, in_features) array of float32 (or of the hand-off type), or a clear error."""
    x = _as_float(layer, x)
    if x.ndim != 2 or x.shape[1] != layer.in_features or x.shape[0] < 1:
        raise ValueError(f"x must be (batch, {layer.in_features}), got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("x must be finite")
    return x


def check_batch(layer: TtLayerState, x, grad_y) -> tuple[np.ndarray, np.ndarray]:
    """``x`` and ``grad_y`` as finite (batch, in_features) and (batch, out_features) arrays, or an error."""
    x = check_input(layer, x)
    grad_y = _as_float(layer, grad_y)
    if grad_y.shape != (x.shape[0], layer.out_features):
        raise ValueError(f"grad_y must be ({x.shape[0]}, {layer.out_features}), got shape {grad_y.shape}")
    if not np.all(np.isfinite(grad_y)):
        raise ValueError("grad_y must be finite")
    return x, grad_y


# ---------------------------------------------------------------------------- the step on PEs
def operands(contraction: Contraction, cores: list[np.ndarray], tensor: np.ndarray,
             saved: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """PE operands ``(A, B)`` of one contraction (codes) as :mod:`codesign.step.tt.schedule` lays them out.

    ``tensor`` is the state (forward) or the state gradient (backward)
    entering it, batch last; ``saved`` the forward state of the same core, as
    it went into PE2 (core gradients). On the dense route: PE3's outer
    products take the input codes ``(B, N)`` as ``tensor`` and the output
    gradient codes ``(B, M)`` as ``saved``, PE1's the output gradient ``(1,
    M, B)`` and the input ``(1, N, B)``; a route step takes its source node
    (codes, flat).
    """
    core = cores[contraction.core]
    r_prev, m, n, r = core.shape
    i_dim, j_dim, k_dim, l_dim = contraction.dims
    if contraction.phase == "outer" and contraction.pe == "tt3":  # inputs (B, N), output gradients (B, M)
        return tensor, saved
    if contraction.phase == "dense_left":  # the node (1, r_lo m n, rest); the core as (r_{lo+1}, r_lo m n)
        return tensor.reshape(i_dim, j_dim, k_dim), np.ascontiguousarray(core.transpose(3, 0, 1, 2)).reshape(
            l_dim, j_dim)
    if contraction.phase == "dense_right":  # the node (rest, m n, r_hi); the core as it lies, (r_{hi-1}, m n, r_hi)
        return tensor.reshape(i_dim, j_dim, k_dim), core.reshape(l_dim, j_dim, k_dim)
    if contraction.phase == "forward":
        return tensor.reshape(i_dim, j_dim, k_dim), np.ascontiguousarray(core.transpose(1, 3, 0, 2)).reshape(
            m * r, r_prev * n)
    if contraction.phase == "input_grad":
        return tensor.reshape(i_dim, j_dim, k_dim), np.ascontiguousarray(core.transpose(0, 2, 1, 3)).reshape(
            r_prev * n, m * r)
    total = contraction.folded  # a core gradient, or PE1's outer products: output gradient (1, M, B), input (1, N, B)

    def fold(t, rows):  # (P, rows, R*B) -> (rows, J, K): the summed positions (p, q) in a row, zero padded
        out = np.empty((rows, j_dim * k_dim), dtype=t.dtype)
        out[:, total:] = 0
        # one copy: the row's first ``total`` words viewed as (P, R*B), filled from t's (rows, P, R*B) view
        np.copyto(out[:, :total].reshape(rows, t.shape[0], t.shape[2]), t.transpose(1, 0, 2))
        return out.reshape(rows, j_dim, k_dim)

    return fold(tensor, i_dim), fold(saved, l_dim)


@dataclass(frozen=True)
class CallCut:
    """Where one PE call of a contraction reads its operands and adds its partial sum: index tuples of slices
    into ``A``, ``B`` and the contraction's result ``Z`` (the call's ranges of I, J, K, L); ``first``: the first
    call into its block of ``Z`` (its partial sum is written, the later ones are added).

    A ``swapped`` call (a PE2 contraction's call on PE1,
    :class:`codesign.step.tt.schedule.PeCall`) cuts the contraction's swapped
    operands instead (:class:`ContractionCuts`): ``a`` = ``(i, k - s, j)``
    of the rows ``A[i, :, k]``, ``b`` = ``(l, :, j)`` of ``B`` as ``(L, 1,
    J)``, ``z`` = ``(i, k - s, l)`` of the swapped result."""

    a: tuple[slice, ...]
    b: tuple[slice, ...]
    z: tuple[slice, ...]
    first: bool
    swapped: bool = False


@dataclass(frozen=True)
class ContractionCuts:
    """A contraction's call cuts in call order, and ``split``: where along ``K`` its swapped calls begin (the
    forward split, :func:`codesign.step.tt.schedule.forward_split_point`), None when it has none. The swapped
    calls read ``A[:, :, split:]`` with ``K`` and ``J`` swapped, ``(I, K - split, J)``, made once for all of them,
    and write into ``Z[:, :, split:]`` seen as ``(I, K - split, L)``; where they leave partial sums
    (``partial``: ``J`` cut), they add into a result of that layout instead, laid into ``Z`` once at the end
    (adding into a strided view costs more than one transposed copy)."""

    cuts: tuple[CallCut, ...]
    split: int | None
    partial: bool = False


CUT_CACHE = 64  # plans whose call cuts are kept (a loop has a few layers, a sweep a few geometries)
_cuts: dict[int, tuple[StepPlan, list[ContractionCuts]]] = {}


def call_cuts(plan: StepPlan) -> list[ContractionCuts]:
    """Every contraction's call cuts: made once per plan, since a step asks for them on every contraction and
    the plan does not change within a step (nor, at fixed ranks, between steps)."""
    entry = _cuts.get(id(plan))
    if entry is not None and entry[0] is plan:  # the entry holds the plan, so its id is not reused while kept
        return entry[1]
    cuts: list[list[CallCut]] = [[] for _ in plan.contractions]
    blocks: list[set] = [set() for _ in plan.contractions]
    splits: list[int | None] = [None] * len(plan.contractions)
    for call in plan.calls:
        if call.swapped and splits[call.index] is None:
            splits[call.index] = call.k[0]  # the first swapped call starts the tail (k innermost, from the split)
    for call in plan.calls:
        i, j, k, l = (slice(start, stop) for start, stop in (call.i, call.j, call.k, call.l))
        pe = plan.contractions[call.index].pe
        block = (call.i, call.l) if pe != "tt2" else (call.i, call.l, call.k)
        first = block not in blocks[call.index]
        if pe == "tt3":  # sample j's input and output gradient, both (B, features)
            cut = CallCut(a=(call.j[0], i), b=(call.j[0], l), z=(i, l), first=first)
        elif call.swapped:
            tail = slice(call.k[0] - splits[call.index], call.k[1] - splits[call.index])
            cut = CallCut(a=(i, tail, j), b=(l, slice(None), j), z=(i, tail, l), first=first, swapped=True)
        else:
            cut = CallCut(a=(i, j, k), b=(l, j, k) if pe == "tt1" else (l, j), z=(i, l) if pe == "tt1" else (i, l, k),
                          first=first)
        cuts[call.index].append(cut)
        blocks[call.index].add(block)
    for index, item in enumerate(plan.contractions):  # the blocks tile Z (so no word of it is left unwritten)
        i_dim, _, k_dim, l_dim = item.dims
        covered = sum(math.prod(stop - start for start, stop in block) for block in blocks[index])
        if covered != i_dim * l_dim * (k_dim if item.pe == "tt2" else 1):
            raise ValueError(f"{item.name}: the calls cover {covered} result words, not all of them")
    out = [ContractionCuts(tuple(mine), split, any(cut.swapped and not cut.first for cut in mine))
           for mine, split in zip(cuts, splits)]
    if len(_cuts) >= CUT_CACHE:
        _cuts.pop(next(iter(_cuts)))
    _cuts[id(plan)] = (plan, out)
    return out


def run_contractions(plan: StepPlan, jobs: Sequence[tuple[int, np.ndarray, np.ndarray]], runner) -> list[np.ndarray]:
    """The full results of the contractions ``(index, A, B)`` in ``jobs``: all their calls in one ``runner.run``
    (one stage of the step, :func:`codesign.step.tt.schedule.stages`, so a runner may run them side by side),
    partial sums added in 64 bits. A runner that computes whole contractions (``contract_whole``,
    :class:`codesign.step.tt.whole.WholeRunner`, or a wrapper passing it through) gets the jobs instead."""
    whole = getattr(runner, "contract_whole", None)
    if whole is not None:
        return whole(plan, jobs)
    cuts = call_cuts(plan)
    work = []
    for index, a, b in jobs:
        pe, split = plan.contractions[index].pe, cuts[index].split
        if split is not None:  # the swapped calls' operands: A's rows (I, K - split, J), B as (L, 1, J)
            a_rows, b_rows = np.ascontiguousarray(a[:, :, split:].transpose(0, 2, 1)), b[:, None, :]
        for cut in cuts[index].cuts:
            if cut.swapped:
                rows = a_rows[cut.a]
                work.append(("tt1", rows.reshape(-1, 1, rows.shape[2]), b_rows[cut.b]))
            else:
                work.append((pe, a[cut.a], b[cut.b]))
    results = runner.run(plan.hardware, work)
    if len(results) != len(work):
        raise RuntimeError(f"the runner answered {len(results)} of {len(work)} calls")
    out, position = [], 0
    for index, _, _ in jobs:
        item, split, partial = plan.contractions[index], cuts[index].split, cuts[index].partial
        i_dim, _, k_dim, l_dim = item.dims
        z = np.empty((i_dim, l_dim) if item.pe != "tt2" else (i_dim, l_dim, k_dim), dtype=np.int64)
        z_rows = None if split is None else np.empty((i_dim, k_dim - split, l_dim), dtype=np.int64) if partial \
            else z[:, :, split:].transpose(0, 2, 1)  # a view of Z: (I, K - split, L)
        for cut in cuts[index].cuts:  # every block's first partial sum is written, the rest added (64-bit)
            result = results[position]
            target = z
            if cut.swapped:  # (I·K, L) rows of the swapped result
                target = z_rows
                result = result.reshape(cut.z[0].stop - cut.z[0].start, cut.z[1].stop - cut.z[1].start, -1)
            if cut.first:
                target[cut.z] = result
            else:
                target[cut.z] += result
            position += 1
        if partial:
            z[:, :, split:] = z_rows.transpose(0, 2, 1)
        out.append(z)
    return out


def run_contraction(plan: StepPlan, index: int, a: np.ndarray, b: np.ndarray, runner) -> np.ndarray:
    """The full result of contraction ``index``: its calls on ``runner``, partial sums added in 64 bits."""
    return run_contractions(plan, [(index, a, b)], runner)[0]


PLAN_CACHE = 64  # schedules kept (a loop asks for each layer's twice a step, at the same shapes every step)
_plans: dict[tuple, StepPlan] = {}


def step_plan(layer: TtLayerState, batch: int, hardware: StepHardware = StepHardware()) -> StepPlan:
    """The schedule of ``layer``'s training step on a batch of ``batch`` samples.

    A schedule is a function of the shapes, widths and builds alone (frozen
    records), so one made before for the same ones is given again rather
    than tiled anew on every pass."""
    check_layer(layer)
    key = (tuple(core.shape for core in layer.cores), batch, layer.activation_bits, layer.grad_bits,
           layer.core_bits, layer.is_network_input, layer.core_grad_route, hardware)
    plan = _plans.get(key)
    if plan is None:
        plan = plan_step(LayerGeometry.of_cores(layer.cores, batch), act_bits=layer.activation_bits,
                         grad_bits=layer.grad_bits, core_bits=layer.core_bits,
                         need_input_grad=not layer.is_network_input, hardware=hardware,
                         core_grad_route=layer.core_grad_route)
        if len(_plans) >= PLAN_CACHE:
            _plans.pop(next(iter(_plans)))
        _plans[key] = plan
    return plan


@dataclass
class ForwardSweep:
    """A layer's forward pass on the PEs, with what its backward pass needs.

    ``y`` (B, M) float64 values; ``cores`` the core codes and ``core_frac``
    their fraction bits; ``states`` the PE2 operand of every forward
    contraction (codes, batch last) and ``state_frac`` its fraction bits;
    ``input_mask`` where ``x`` lay inside the activation range (the clipped
    straight-through estimator); ``scales`` every scale used and tracked so far
    (:class:`~codesign.step.tt.scale_book.ScaleBook`).
    """

    y: np.ndarray
    cores: list[np.ndarray]
    core_frac: list[int]
    states: list[np.ndarray]
    state_frac: list[int]
    input_mask: np.ndarray
    scales: ScaleBook

    @property
    def trackers(self) -> dict[str, list[int]]:
        """Every tracker's fraction bits after the pass (what the next pass starts from)."""
        return self.scales.trackers

    @property
    def means(self) -> dict[str, list[float]]:
        """Every tracker's running mean |x| after the pass."""
        return self.scales.means


def forward_sweep(layer: TtLayerState, x: np.ndarray, plan: StepPlan, runner, *, update: bool = True
                  ) -> ForwardSweep:
    """The forward contractions of ``plan`` (the first ``order`` ones) on ``runner``, with the host's scaling.

    ``x`` is a checked (B, N) batch (:func:`check_input`). ``update``: re-aim every
    activation and bias scale from this batch (the layer in training mode);
    otherwise a scale is only aimed while unset (evaluation mode), the golden
    layer's rule.
    """
    batch = x.shape[0]
    d = plan.geometry.order
    book = ScaleBook(layer.tracker_values(), layer.mean_values(), rule=layer.scale_rule,
                     momentum=layer.scale_momentum)
    tr = book.trackers

    # cores: fixed scales (set when the layer was built)
    cores, core_frac = [], []
    for k, core in enumerate(layer.cores):
        values = core.astype(np.float64)
        frac = frac_of_values(values, bits=layer.core_bits, headroom_bits=layer.core_headroom_bits,
                              current=tr["core_frac_bits"][k], update=False)
        tr["core_frac_bits"][k] = frac
        cores.append(quantize_values(values, frac, layer.core_bits))
        core_frac.append(frac)

    x64 = x.astype(np.float64)
    frac = book.host("act_frac_bits", 0, x64, bits=layer.activation_bits,
                     headroom_bits=layer.activation_headroom_bits, update=update)
    scaled = np.ldexp(x64, frac)
    low, high = -(1 << (layer.activation_bits - 1)), (1 << (layer.activation_bits - 1)) - 1
    state = quantize_values(x64, frac, layer.activation_bits).T  # batch last: (N, B) = (n_1, R_1 * B)
    states, state_frac = [], []
    for k in range(d):
        a, b = operands(plan.contractions[k], cores, state)
        states.append(a)  # (P, r_{k-1} n_k, R_k B), kept for the core gradient
        state_frac.append(frac)
        z = run_contraction(plan, k, a, b, runner)
        z_frac = frac + core_frac[k]
        if k == d - 1:
            y = to_values(z.reshape(-1, batch).T, z_frac)
            break
        frac, state = book.round("act_frac_bits", k + 1, z, z_frac, bits=layer.activation_bits,
                                 headroom_bits=layer.activation_headroom_bits, update=update)
    if layer.bias is not None:  # a parameter the host writes: its scale is aimed at it (both rules)
        bias = layer.bias.astype(np.float64)
        frac_b = frac_of_values(bias, bits=layer.bias_bits, headroom_bits=layer.activation_headroom_bits,
                                current=tr["bias_frac_bits"][0], update=update)
        tr["bias_frac_bits"][0] = frac_b
        y = y + to_values(quantize_values(bias, frac_b, layer.bias_bits), frac_b)
    return ForwardSweep(y=y, cores=cores, core_frac=core_frac, states=states, state_frac=state_frac,
                        input_mask=(scaled >= low) & (scaled <= high), scales=book)


def _step_forward(layer: TtLayerState, x: np.ndarray, plan: StepPlan, runner, forward: ForwardSweep | None
                  ) -> ForwardSweep:
    """The forward sweep a step starts from: ``forward`` when given (checked against the layer and batch), else a
    training-mode sweep on ``runner``."""
    if forward is None:
        return forward_sweep(layer, x, plan, runner)
    if forward.y.shape != (x.shape[0], layer.out_features) or len(forward.states) != plan.geometry.order or \
            [c.shape for c in forward.cores] != [c.shape for c in layer.cores]:
        raise ValueError("forward is not a sweep of this layer on this batch")
    return forward


def pe_step(layer: TtLayerState, x, grad_y, runner, hardware: StepHardware = StepHardware(), *,
            forward: ForwardSweep | None = None) -> StepResult:
    """The training step of ``layer`` on ``(x, grad_y)`` as PE calls on ``runner`` plus integer host work.

    States and state gradients are kept with the batch as the last axis
    (:mod:`codesign.step.tt.schedule`). The new scale trackers are returned in
    the result (the caller stores them).

    ``forward``: the training-mode sweep (:func:`forward_sweep`, ``update``
    on) the caller already took of this layer on this ``x`` with this
    ``hardware``'s plan, whose trackers ``layer`` now holds. The step starts
    from it instead of sweeping again: under the exact rule a second sweep
    would re-aim every scale from the same batch to the scale the first set,
    so it would compute the same codes twice; under the tracked rule the
    trackers already hold the next step's scales, so a second sweep would
    not even be the same. Its scale book is taken over (updated in place).
    """
    check_layer(layer)
    x, grad_y = check_batch(layer, x, grad_y)
    batch = x.shape[0]
    plan = step_plan(layer, batch, hardware)
    geo = plan.geometry
    d = geo.order
    shapes = [geo.core(k) for k in range(d)]
    fwd = _step_forward(layer, x, plan, runner, forward)
    book, cores, states, state_frac = fwd.scales, fwd.cores, fwd.states, fwd.state_frac
    index = d

    # backward
    g64 = grad_y.astype(np.float64)
    frac = book.host("grad_frac_bits", d - 1, g64, bits=layer.grad_bits, headroom_bits=layer.grad_headroom_bits,
                     update=True)
    g_top = quantize_values(g64, frac, layer.grad_bits)
    if layer.core_grad_route == "dense":
        core_grads, grad_x = _dense_backward(layer, plan, runner, fwd, g_top, frac)
        return _result(layer, plan, fwd, core_grads, grad_x, g_top)
    g = g_top.T  # batch last: (M, B)
    core_grads: list[np.ndarray] = [None] * d  # type: ignore[list-item]
    stage_of = {index: stage for stage in stages(plan) for index in stage}
    grad_x = None
    for k in range(d - 1, -1, -1):
        s = shapes[k]
        g = g.reshape(s["P"], s["m"] * s["c"], s["R"] * s["B"])
        stage = [(index, *operands(plan.contractions[index], cores, g, states[k]))]
        if len(stage_of[index]) > 1:  # the input gradient of core k, on the same g, in the same stage
            stage.append((index + 1, *operands(plan.contractions[index + 1], cores, g)))
        dg, *rest = run_contractions(plan, stage, runner)
        index += 1
        dg_frac = book.frac("grad_frac_bits", k) + state_frac[k]
        # scale and round in PE1's (m, c, a, n) order, then lay out as the core (a, m, n, c): the same values
        # and strides as rounding the transposed view, at contiguous speed
        cg, codes = book.round("core_grad_frac_bits", k, dg, dg_frac, bits=layer.grad_bits,
                               headroom_bits=layer.grad_headroom_bits)
        codes = codes.reshape(s["m"], s["c"], s["a"], s["n"])
        core_grads[k] = to_values(codes.transpose(2, 0, 3, 1), cg).astype(np.float32)
        if not rest:
            break
        (z,) = rest
        index += 1
        g, grad_x = _state_gradient(layer, fwd, k, z)
    return _result(layer, plan, fwd, core_grads, grad_x, g_top)


def _state_gradient(layer: TtLayerState, fwd: ForwardSweep, k: int, z: np.ndarray
                    ) -> tuple[np.ndarray | None, np.ndarray | None]:
    """What the input-gradient contraction of core ``k`` (result ``z``) gives: the rounded gradient of the state
    entering ``k`` (its scale re-aimed), or for ``k = 0`` the layer's input gradient, zero where the input
    saturated (the clipped straight-through estimator). Returns ``(gradient codes, None)`` or ``(None, grad_x)``."""
    z_frac = fwd.scales.frac("grad_frac_bits", k) + fwd.core_frac[k]
    if k == 0:
        batch = fwd.y.shape[0]
        return None, (to_values(z, z_frac).reshape(-1, batch).T * fwd.input_mask).astype(layer.hand_off_dtype)
    _, g = fwd.scales.round("grad_frac_bits", k - 1, z, z_frac, bits=layer.grad_bits,
                            headroom_bits=layer.grad_headroom_bits)
    return g, None


def _dense_backward(layer: TtLayerState, plan: StepPlan, runner, fwd: ForwardSweep, g_top: np.ndarray, g_frac: int
                    ) -> tuple[list[np.ndarray], np.ndarray | None]:
    """The backward stages of the dense route (:mod:`codesign.numerics.tt_dense_route`): the input-gradient chain
    as on the direct route, and beside it the outer products, whose sum over the batch is ``dW^T``, then the
    route's steps to every core gradient. The host rounds ``dW`` and each partial to ``grad_bits`` at a scale
    chosen from that tensor alone (nothing carries it to the next step), each core gradient at its tracker."""
    geo, d = plan.geometry, plan.geometry.order
    batch = geo.batch
    g = g_top.T  # batch last: (M, B)
    nodes: dict = {}  # node -> (codes, fraction bits)
    core_grads: list[np.ndarray] = [None] * d  # type: ignore[list-item]
    grad_x = None

    def keep(node, z, z_frac):
        lo, hi = node
        core_grad = hi == lo + 1
        frac, codes = fwd.scales.round("core_grad_frac_bits" if core_grad else None, lo, z, z_frac,
                                       bits=layer.grad_bits, headroom_bits=layer.grad_headroom_bits)
        if core_grad:
            core_grads[lo] = to_values(codes.reshape(fwd.cores[lo].shape), frac).astype(np.float32)
        else:
            nodes[node] = (codes, frac)

    for stage in stages(plan)[d:]:
        jobs, targets = [], []
        for index in stage:
            item = plan.contractions[index]
            if item.phase == "input_grad":
                s = geo.core(item.core)
                jobs.append((index, *operands(item, fwd.cores, g.reshape(s["P"], s["m"] * s["c"], s["R"] * s["B"]))))
                targets.append(None)
            elif item.phase == "outer" and item.pe == "tt3":  # the input (B, N) as the forward sweep rounded it
                x_codes = np.ascontiguousarray(fwd.states[0].reshape(-1, batch).T)
                jobs.append((index, *operands(item, fwd.cores, x_codes, g_top)))
                targets.append(None)
            elif item.phase == "outer":
                jobs.append((index, *operands(item, fwd.cores, g[None], fwd.states[0].reshape(1, -1, batch))))
                targets.append(None)
            else:
                step = item.route
                codes, frac = nodes[step.source]
                jobs.append((index, *operands(item, fwd.cores, codes)))
                targets.append((step, frac + fwd.core_frac[step.core]))
        for index, target, z in zip(stage, targets, run_contractions(plan, jobs, runner)):
            item = plan.contractions[index]
            if item.phase == "outer":  # dW (M, N) (PE3 gives dW^T) as (m_1, n_1, .., m_d, n_d)
                z = (z.T if item.pe == "tt3" else z).reshape(*geo.out_modes, *geo.in_modes)
                keep((0, d), z.transpose([axis for k in range(d) for axis in (k, d + k)]), fwd.state_frac[0] + g_frac)
            elif item.phase == "input_grad":
                g, grad_x = _state_gradient(layer, fwd, item.core, z)
            else:
                keep(target[0].target, z, target[1])
    return core_grads, grad_x


def _result(layer: TtLayerState, plan: StepPlan, fwd: ForwardSweep, core_grads: list[np.ndarray],
            grad_x: np.ndarray | None, g_top: np.ndarray) -> StepResult:
    """The step's result: the bias gradient (the batch's sum of the output gradient codes, rounded) added."""
    d = plan.geometry.order
    bias_grad = None
    if layer.bias is not None:
        total = g_top.sum(axis=0)
        g_frac = fwd.scales.frac("grad_frac_bits", d - 1)
        frac_bg, codes = fwd.scales.round("bias_grad_frac_bits", 0, total, g_frac, bits=layer.grad_bits,
                                          headroom_bits=layer.grad_headroom_bits)
        bias_grad = to_values(codes, frac_bg).astype(np.float32)
    stats = {"calls": len(plan.calls), "contractions": len(plan.contractions),
             "macs": sum(c.macs for c in plan.contractions)}
    trackers, means = fwd.scales.as_tuples()
    return StepResult(y=fwd.y.astype(layer.hand_off_dtype), grad_x=grad_x, core_grads=core_grads, bias_grad=bias_grad,
                      trackers=trackers, means=means, stats=stats)
