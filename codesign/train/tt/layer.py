"""``TTLinear``: a fully connected layer whose weight is a tensor train, trained through core contractions.

The layer keeps full-precision *shadow* cores as its parameters (the
optimiser updates them) and, when it has a :class:`TTPrecision`, runs the
forward and backward passes on a 4-bit copy (BinaryConnect, paper 003,
Eq. (3)); the gradient computed for the quantised copy is applied to the
shadow copy (straight-through). Inputs are rounded to 8 bits and their
gradient is passed only where the input was representable, which after a
ReLU is the clipped-ReLU straight-through estimator of Sec. 3.2. Biases are
8-bit, every gradient 16-bit, with power-of-two scales tracked from mean
|x| (Sec. 3.3). Sums of products of codes are computed in float64, which is
exact at these widths, so a result equals what an integer datapath
accumulates. With ``precision.hand_off = "exact"`` the output and the input
gradient leave the layer in float64, as exact as the sums, so the next layer
rounds them once, as a PE's rounding stage does (``hand_off_float``); with
``"float32"`` in the input's type.
Without a precision the layer computes in its float32, as
paper 003's floating-point arms do.

The layer is a counted layer: the trainer's cost ledger receives the MACs of
each contraction (forward, error = backward sweep, weight_grad = core
gradients) with their operand widths, so the energy model prices them like
any other integer MAC.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from codesign.numerics.scales import hand_off_float
from codesign.train.config import require
from codesign.train.layers import CountedMixin
from codesign.train.tt.precision import (NO_MEAN, UNSET, TTPrecision, aim_tracker, fixed_format, mean_buffer,
                                         representable_range, tracked_quantize)
from codesign.step.tt.layer_state import TRACKERS
from codesign.train.quantize import quantize
from codesign.train.tt.ttm import (TTMatrix, check_cores, check_max_rank, check_modes, contraction_macs,
                                   dense_route_sizes, forward_shapes, tt_backward, tt_dense_core_grads, tt_forward,
                                   tt_to_dense)


class _TTFunction(torch.autograd.Function):
    """Forward and backward sweeps of :mod:`codesign.train.tt.ttm`, quantised per the layer's precision."""

    @staticmethod
    def forward(ctx, x, bias, layer, *cores):
        q = layer.precision_tt
        update = layer.training
        # low precision: exact sums of codes in float64; float: the parameters' own float32, as a float layer runs
        work = torch.float64 if q is not None else x.dtype
        x_work = x.detach().to(work)
        mask = None
        if q is not None:
            xq = layer._quantize("act_frac_bits", 0, x_work, q.activation_bits, q.activation_headroom_bits, update)
            low, high = representable_range(q.activation_bits, layer.used_frac("act_frac_bits", 0))
            mask = (x_work >= low) & (x_work <= high)  # straight-through only where the input was not saturated
            cores_q = [layer._quantize_core(k, core.detach().to(torch.float64)) for k, core in enumerate(cores)]
            hook = None
            if q.quantize_intermediates:
                def hook(k, state):
                    if k == 0:
                        return state  # the input, already rounded
                    return layer._quantize("act_frac_bits", k, state, q.activation_bits, q.activation_headroom_bits,
                                           update)
        else:
            xq, cores_q, hook = x_work, [core.detach().to(work) for core in cores], None
        y, saved = tt_forward(xq, cores_q, on_state=hook)
        if bias is not None:
            b_work = bias.detach().to(work)
            if q is not None:
                b_work = layer._quantize("bias_frac_bits", 0, b_work, q.bias_bits, q.activation_headroom_bits, update)
            y = y + b_work
        ctx.layer, ctx.saved, ctx.cores_q, ctx.mask = layer, saved, cores_q, mask
        ctx.has_bias, ctx.update = bias is not None, update
        ctx.x_dtype, ctx.parameter_dtype = x.dtype, cores[0].dtype
        layer._record_forward(cores_q, saved, y)
        return y.to(hand_off_dtype(q, x.dtype))

    @staticmethod
    def backward(ctx, grad_y):
        layer, q = ctx.layer, ctx.layer.precision_tt
        d = len(ctx.cores_q)
        g = grad_y.detach().to(torch.float64 if q is not None else grad_y.dtype)
        hook = None
        if q is not None:
            g = layer._quantize("grad_frac_bits", d - 1, g, q.grad_bits, q.grad_headroom_bits, ctx.update)
            if q.quantize_intermediates:
                def hook(k, state):
                    if k == d - 1:
                        return state  # the incoming gradient, already rounded
                    return layer._quantize("grad_frac_bits", k, state, q.grad_bits, q.grad_headroom_bits, ctx.update)
        need_x = ctx.needs_input_grad[0] and not layer.is_network_input
        dense = q is not None and q.core_grad_route == "dense"
        grad_x, core_grads = tt_backward(g, ctx.cores_q, ctx.saved, need_input_grad=need_x, on_grad=hook,
                                         need_core_grads=not dense)
        grad_b = g.sum(dim=0) if ctx.has_bias and ctx.needs_input_grad[1] else None
        if q is not None:
            if dense:
                core_grads = layer._dense_core_grads(g, ctx.saved[0], ctx.cores_q, ctx.update)
            else:
                core_grads = [layer._quantize("core_grad_frac_bits", k, cg, q.grad_bits, q.grad_headroom_bits,
                                              ctx.update) for k, cg in enumerate(core_grads)]
            if grad_b is not None:
                grad_b = layer._quantize("bias_grad_frac_bits", 0, grad_b, q.grad_bits, q.grad_headroom_bits,
                                         ctx.update)
            if grad_x is not None:
                grad_x = grad_x * ctx.mask
        layer._record_backward(ctx.cores_q, g.shape[0], need_x)
        dtype = ctx.parameter_dtype  # each gradient in its input's type: the layer's input, the bias, the cores
        grads_cores = [cg.to(dtype) if needed else None
                       for cg, needed in zip(core_grads, ctx.needs_input_grad[3:])]
        return (None if grad_x is None else grad_x.to(ctx.x_dtype), None if grad_b is None else grad_b.to(dtype),
                None, *grads_cores)


def hand_off_dtype(q: TTPrecision | None, dtype: torch.dtype) -> torch.dtype:
    """The type of the layer's output: float64 where it hands off exactly (the PEs' values, which the next layer
    rounds once; :func:`~codesign.numerics.scales.hand_off_float`), else the input's ``dtype``."""
    return torch.float64 if q is not None and hand_off_float(q.hand_off) == "float64" else dtype


def _int_buffer(length: int) -> torch.Tensor:
    return torch.full((length,), UNSET, dtype=torch.int64)




class TTLinear(nn.Module, CountedMixin):
    """``y = x W^T + b`` with ``W`` (out_features, in_features) held as TT cores and never formed.

    ``in_modes`` factor ``in_features``, ``out_modes`` factor ``out_features``
    (the same number of modes); ``max_rank`` caps the inner TT ranks (an int
    or ``d - 1`` ints). The cores start as the TT-SVD of an ``nn.Linear``-style
    random matrix, rescaled to that matrix's Frobenius norm so truncation does
    not shrink the initial signal. ``precision=None`` trains in float32;
    a :class:`TTPrecision` trains in low precision.
    """

    def __init__(self, in_features: int, out_features: int, *, in_modes: Sequence[int], out_modes: Sequence[int],
                 max_rank, bias: bool = True, precision: TTPrecision | None = None) -> None:
        require(isinstance(in_features, int) and in_features >= 1, "in_features", f"must be an int >= 1, got {in_features!r}")
        require(isinstance(out_features, int) and out_features >= 1, "out_features",
                f"must be an int >= 1, got {out_features!r}")
        in_modes = check_modes(in_modes, "in_modes", in_features, "in_features")
        out_modes = check_modes(out_modes, "out_modes", out_features, "out_features")
        require(len(in_modes) == len(out_modes), "out_modes",
                f"needs as many modes as in_modes ({len(in_modes)}), got {len(out_modes)}")
        check_max_rank(max_rank, len(in_modes))
        require(precision is None or isinstance(precision, TTPrecision), "precision",
                f"must be a TTPrecision or None, got {type(precision).__name__}")
        bound = 1.0 / math.sqrt(in_features)  # nn.Linear's default init range
        dense = (torch.rand(out_features, in_features, dtype=torch.float64) * 2 - 1) * bound
        ttm = TTMatrix.from_dense(dense.numpy(), in_modes, out_modes, max_rank)
        approx = np.linalg.norm(ttm.to_dense())
        if approx > 0:  # spread the norm correction evenly over the cores
            factor = (float(dense.norm()) / approx) ** (1.0 / len(ttm.cores))
            ttm = TTMatrix(cores=[core * factor for core in ttm.cores], in_modes=in_modes, out_modes=out_modes)
        initial_bias = (torch.rand(out_features, dtype=torch.float64) * 2 - 1) * bound if bias else None
        self._setup(ttm, initial_bias, precision)

    @classmethod
    def from_ttm(cls, ttm: TTMatrix, *, bias=None, precision: TTPrecision | None = None) -> TTLinear:
        """A layer holding the given cores (and bias, shape (out_features,), or None)."""
        require(isinstance(ttm, TTMatrix), "ttm", f"must be a TTMatrix, got {type(ttm).__name__}")
        if bias is not None:
            bias = torch.as_tensor(np.asarray(bias) if not isinstance(bias, torch.Tensor) else bias)
            require(tuple(bias.shape) == (ttm.shape[0],), "bias",
                    f"must have shape ({ttm.shape[0]},), got {tuple(bias.shape)}")
        require(precision is None or isinstance(precision, TTPrecision), "precision",
                f"must be a TTPrecision or None, got {type(precision).__name__}")
        layer = cls.__new__(cls)
        layer._setup(ttm, bias, precision)
        return layer

    def _setup(self, ttm: TTMatrix, bias, precision: TTPrecision | None) -> None:
        nn.Module.__init__(self)
        self._init_counting()
        self.in_modes, self.out_modes = tuple(ttm.in_modes), tuple(ttm.out_modes)
        self.in_features, self.out_features = ttm.shape[1], ttm.shape[0]
        self.precision_tt = precision
        self.cores = nn.ParameterList(
            nn.Parameter(torch.as_tensor(np.asarray(core), dtype=torch.float32).clone()) for core in ttm.cores)
        self.bias = None if bias is None else nn.Parameter(torch.as_tensor(bias, dtype=torch.float32).clone())
        d = len(self.cores)
        for name in TRACKERS:  # fraction bits, and the running mean |x| the tracked rule aims them from
            length = 1 if name.startswith("bias") else d
            self.register_buffer(name, _int_buffer(length))
            self.register_buffer(mean_buffer(name), torch.full((length,), NO_MEAN, dtype=torch.float64))
        self._used: dict[tuple[str, int], int] = {}
        if precision is not None:
            self.reset_core_scales()

    # -- structure ---------------------------------------------------------
    @property
    def ranks(self) -> tuple[int, ...]:
        """TT ranks ``(1, r_1, ..., r_{d-1}, 1)`` of the current cores."""
        return check_cores(list(self.cores))

    @property
    def order(self) -> int:
        return len(self.cores)

    def tt_matrix(self, *, quantized: bool = False) -> TTMatrix:
        """The cores as a NumPy :class:`TTMatrix`: the shadow (full-precision) copy, or the quantised one."""
        cores = [self._quantize_core(k, core.detach().to(torch.float64)) if quantized and self.precision_tt else
                 core.detach().to(torch.float64) for k, core in enumerate(self.cores)]
        return TTMatrix(cores=[core.numpy() for core in cores], in_modes=self.in_modes, out_modes=self.out_modes)

    def dense_weight(self) -> torch.Tensor:
        """``W`` multiplied out from the shadow cores (differentiable; for checks, never used in a pass)."""
        return tt_to_dense(list(self.cores))

    def memory_bits(self) -> dict[str, int]:
        """Bits to store the parameters the layer computes with: cores and bias at their trained widths."""
        q = self.precision_tt
        core_values = sum(int(core.numel()) for core in self.cores)
        bias_values = 0 if self.bias is None else int(self.bias.numel())
        core_bits, bias_bits = (q.core_bits, q.bias_bits) if q is not None else (32, 32)
        return {"core_values": core_values, "bias_values": bias_values, "core_bits": core_values * core_bits,
                "bias_bits": bias_values * bias_bits, "total_bits": core_values * core_bits + bias_values * bias_bits}

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, in_modes={self.in_modes}, "
                f"out_modes={self.out_modes}, ranks={self.ranks}, precision={self.precision_tt}")

    # -- quantisation ------------------------------------------------------
    def _quantize(self, buffer: str, index: int, tensor: torch.Tensor, bits: int, headroom: int,
                  update: bool) -> torch.Tensor:
        """``tensor`` rounded at the scale tracker ``buffer[index]`` gives under the precision's rule (the bias, a
        parameter the host writes, is aimed at itself under both rules)."""
        q = self.precision_tt
        rule = "exact" if buffer == "bias_frac_bits" else q.scale_rule
        frac = aim_tracker(tensor, getattr(self, buffer), getattr(self, mean_buffer(buffer)), index, bits=bits,
                           headroom_bits=headroom, rule=rule, momentum=q.scale_momentum, update=update)
        self._used[(buffer, index)] = frac
        return quantize(tensor, fixed_format(bits, frac, q.rounding))

    def used_frac(self, buffer: str, index: int) -> int:
        """The fraction bits tensor ``buffer[index]`` was last rounded at (under the tracked rule the tracker
        already holds the next step's)."""
        return self._used[(buffer, index)]

    def _quantize_core(self, k: int, core: torch.Tensor) -> torch.Tensor:
        q = self.precision_tt
        return tracked_quantize(core, self.core_frac_bits, k, bits=q.core_bits, headroom_bits=q.core_headroom_bits,
                                rounding=q.rounding, update=False)

    def _dense_core_grads(self, g: torch.Tensor, x_state: torch.Tensor, cores_q, update: bool) -> list[torch.Tensor]:
        """Core gradients by the dense route (:func:`tt_dense_core_grads`): ``dW = g^T x`` from the rounded
        output gradient and input (exact in float64), then every node of the route rounded to ``grad_bits`` as the
        PE step's host rounds it: ``dW`` and the partials at a scale chosen from that tensor alone (they are made
        and used within the step, so no tracker carries them), each core gradient at its tracked scale."""
        q = self.precision_tt
        dense_grad = g.T @ x_state.reshape(g.shape[0], self.in_features)

        def round_node(node, tensor):
            if node[1] == node[0] + 1:  # a core gradient
                return self._quantize("core_grad_frac_bits", node[0], tensor, q.grad_bits, q.grad_headroom_bits,
                                      update)
            fresh = _int_buffer(1)
            return tracked_quantize(tensor, fresh, 0, bits=q.grad_bits, headroom_bits=q.grad_headroom_bits,
                                    rounding=q.rounding, update=True)

        return tt_dense_core_grads(dense_grad, cores_q, on_node=round_node)

    def reset_core_scales(self) -> None:
        """Fix each core's power-of-two scale from its current mean |value| (done once, at construction)."""
        q = self.precision_tt
        if q is None:
            return
        self.core_frac_bits.fill_(UNSET)
        for k, core in enumerate(self.cores):
            self._quantize_core(k, core.detach().to(torch.float64))

    @torch.no_grad()
    def clip_shadow_(self) -> None:
        """Clip the shadow cores to what their 4-bit codes can represent (BinaryConnect's clipping)."""
        if self.precision_tt is None:
            return
        for k, core in enumerate(self.cores):
            low, high = representable_range(self.precision_tt.core_bits, int(self.core_frac_bits[k]))
            core.clamp_(low, high)

    # -- rank pruning ------------------------------------------------------
    @torch.no_grad()
    def prune_ranks(self, keep: dict[int, torch.Tensor]) -> list[tuple[nn.Parameter, nn.Parameter, dict[int, torch.Tensor]]]:
        """Keep only the listed slices of inner ranks; ``keep[k]`` indexes ``r_k`` (1 <= k <= d-1).

        Slice ``c`` of ``r_k`` is the last index of core ``k-1`` and the first
        of core ``k`` (0-based cores); both go. The cores become new, smaller
        parameters. Returns ``(old, new, {dim: kept indices})`` per replaced
        parameter, so an optimiser's state can be sliced the same way.
        """
        d = self.order
        ranks = self.ranks
        for k, index in keep.items():
            require(isinstance(k, int) and 1 <= k <= d - 1, f"keep[{k!r}]", f"inner rank index must be in [1, {d - 1}]")
            index = torch.as_tensor(index, dtype=torch.long)
            require(index.ndim == 1 and index.numel() >= 1, f"keep[{k}]", "must keep at least one slice")
            require(bool((index >= 0).all() and (index < ranks[k]).all()), f"keep[{k}]",
                    f"indices must lie in [0, {ranks[k]})")
            require(index.unique().numel() == index.numel(), f"keep[{k}]", "indices must be distinct")
        per_core: dict[int, dict[int, torch.Tensor]] = {}
        for k, index in keep.items():
            index = torch.as_tensor(index, dtype=torch.long)
            if index.numel() == ranks[k]:
                continue
            per_core.setdefault(k - 1, {})[3] = index
            per_core.setdefault(k, {})[0] = index
        replaced = []
        for core_index, dims in sorted(per_core.items()):
            old = self.cores[core_index]
            value = old.detach()
            for dim, index in dims.items():
                value = value.index_select(dim, index)
            new = nn.Parameter(value.clone())
            self.cores[core_index] = new
            replaced.append((old, new, dims))
        return replaced

    # -- passes ------------------------------------------------------------
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        require(x.ndim >= 2 and math.prod(x.shape[1:]) == self.in_features, "x",
                f"must be (batch, {self.in_features}) or flatten to it, got shape {tuple(x.shape)}")
        x = x.reshape(x.shape[0], self.in_features)
        return _TTFunction.apply(x, self.bias, self, *self.cores)

    # -- cost accounting ---------------------------------------------------
    def _widths(self, phase: str) -> tuple[str, int, int]:
        q = self.precision_tt
        if q is None:
            return "fp32", 32, 32
        return {"forward": ("int", q.activation_bits, q.core_bits), "error": ("int", q.grad_bits, q.core_bits),
                "weight_grad": ("int", q.grad_bits, q.activation_bits)}[phase]

    def _record_forward(self, cores_q, saved, y) -> None:
        if self.ledger is None:
            return
        arith, bits_a, bits_b = self._widths("forward")
        macs = sum(contraction_macs(cores_q, y.shape[0])["forward"])
        self.ledger.add_macs(self.layer_name, "forward", macs, bits_a=bits_a, bits_b=bits_b, arith=arith)
        traffic = sum(s.numel() * bits_a + c.numel() * bits_b for s, c in zip(saved, cores_q)) + y.numel() * 32
        self.ledger.add_dram(self.layer_name, "forward", traffic)

    def _record_backward(self, cores_q, batch: int, need_x: bool) -> None:
        if self.ledger is None:
            return
        macs = contraction_macs(cores_q, batch)
        shapes = forward_shapes(cores_q, batch)
        arith, bits_a, bits_b = self._widths("error")
        error_cores = range(len(cores_q)) if need_x else range(1, len(cores_q))
        self.ledger.add_macs(self.layer_name, "error", sum(macs["input_grad"][k] for k in error_cores),
                             bits_a=bits_a, bits_b=bits_b, arith=arith)
        grad_sizes = [b * p * c.shape[1] * c.shape[3] * rem for (b, p, _, _, rem), c in zip(shapes, cores_q)]
        state_sizes = [math.prod(shape) for shape in shapes]
        self.ledger.add_dram(self.layer_name, "error", sum(grad_sizes[k] * bits_a + cores_q[k].numel() * bits_b
                                                           + state_sizes[k] * 32 for k in error_cores))
        arith, bits_a, bits_b = self._widths("weight_grad")
        q = self.precision_tt
        if q is not None and q.core_grad_route == "dense":
            # the outer products (16 x 8 bits, each product a 32-bit word out), then the route (16 x 4 bits), every
            # node read and written at grad_bits, the cores read once
            outer = batch * self.in_features * self.out_features
            self.ledger.add_macs(self.layer_name, "weight_grad", outer, bits_a=bits_a, bits_b=bits_b, arith=arith)
            route = dense_route_sizes(cores_q)
            self.ledger.add_macs(self.layer_name, "weight_grad", sum(m for _, _, m in route), bits_a=bits_a,
                                 bits_b=q.core_bits, arith=arith)
            self.ledger.add_dram(self.layer_name, "weight_grad", batch * (self.in_features * bits_b + self.out_features
                                                                          * bits_a) + outer * 32 + sum(
                (read + written) * bits_a for read, written, _ in route) + sum(c.numel() for c in cores_q) * q.core_bits)
            return
        self.ledger.add_macs(self.layer_name, "weight_grad", sum(macs["core_grad"]), bits_a=bits_a, bits_b=bits_b,
                             arith=arith)
        self.ledger.add_dram(self.layer_name, "weight_grad", sum(
            g * bits_a + s * bits_b + c.numel() * 32 for g, s, c in zip(grad_sizes, state_sizes, cores_q)))


def tt_layers(model: nn.Module) -> list[TTLinear]:
    return [module for module in model.modules() if isinstance(module, TTLinear)]


__all__ = ["TTLinear", "tt_layers"]
