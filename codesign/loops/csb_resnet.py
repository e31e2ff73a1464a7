"""Golden compressed training of a residual conv network on the CSB PE: plain convs, then basic blocks, then a head.

:class:`codesign.loops.csb_conv.CsbConvTrainer` with ResNet's basic blocks after its convs (ResNet-8's layers
are one stem conv and three blocks): ``out = relu(conv2(relu(conv1(x))) + shortcut(x))``, the shortcut the
identity or a trainable 1 x 1 projection at the block's stride (:mod:`codesign.step.csb.conv_net`). There is no
batch norm: its batch statistics have no form on the PE yet, and paper 002 trains without it.

Everything else is the conv loop's: the float64 warm-up measuring every layer's scales, the kernel-wise pruning
search over every conv (projections included; the head is never pruned), 8-bit codes and 24-bit buffers, plain
SGD through UPD. In fixed point the shortcut adds in place, as the PE will add it:

- forward: ``z2 = FP(conv2, h) + x * 2^jf`` (identity) or ``+ FP(projection, x)``, exact (the set-up refuses a
  network whose sums could saturate, counting the shortcut's term);
- backward: conv2's error ``dz2`` (its sums masked by ``z2 > 0``, rounded to ``fe2``) feeds WG of conv2 and the
  projection and EB of conv2; the block input's error sums are ``EB(conv1, dz1) + dz2 * 2^jb`` (or ``+
  EB(projection, dz2)``), masked by the sign of the sums that made the input and rounded to that layer's ``fe``.

The scales the warm-up measures are lowered where a block needs it (:func:`~codesign.step.csb.conv_net.align_fractions`),
so both addends of every such sum share a fraction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Tuple

import numpy as np

from codesign.loops.common import HwTrainError, softmax_cross_entropy
from codesign.loops.conv_float import conv2d, conv2d_grads, pad_map
from codesign.loops.csb import quantize, rescale
from codesign.loops.csb_conv import CsbConvSetup, CsbConvTrainer, check_stride_pairs
from codesign.step.csb.conv_net import (ResidualBlock, align_fractions, net_stages, resnet_shapes, shortcut_shifts,
                                        shortcut_terms, stage_in, stage_out)


@dataclass(frozen=True)
class CsbResNetSetup(CsbConvSetup):
    """:class:`CsbConvSetup` with ``blocks``: the basic blocks after the convs, ``(outputs, stride)`` each."""

    list_fields = ("image", "convs", "blocks")

    blocks: Tuple[Tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "blocks", tuple(tuple(block) for block in self.blocks))
        except TypeError:
            raise HwTrainError(f"blocks {self.blocks!r} must be a sequence of (outputs, stride) pairs") from None
        check_stride_pairs("blocks", self.blocks, self.spec)
        super().__post_init__()

    @property
    def shapes_and_blocks(self):
        return resnet_shapes(self.spec, self.image, self.convs, self.blocks, self.classes)

    @property
    def residual_blocks(self) -> Tuple[ResidualBlock, ...]:
        return self.shapes_and_blocks[1]

    @property
    def layer_maps(self) -> List[Tuple[int, int, int, int, int, int, int]]:
        shapes, _ = self.shapes_and_blocks
        return [(s.channels, s.outputs, s.kernel, s.stride, *s.out_map, s.height * s.width) for s in shapes]

    def largest_sum_terms(self) -> int:
        shapes, blocks = self.shapes_and_blocks
        extra = max(shortcut_terms(shapes, block) for block in blocks)
        return super().largest_sum_terms() + extra


class CsbResNetTrainer(CsbConvTrainer):
    """Compressed training of :class:`CsbResNetSetup`'s network: float64 warm-up, then every product on
    ``backend``, each shortcut added in place."""

    def __init__(self, setup: CsbResNetSetup, backend=None) -> None:
        super().__init__(setup, backend)
        self.blocks = setup.residual_blocks
        self.stages = net_stages(len(self.layers), self.blocks)

    def _aligned(self, frac_bits: list[dict[str, int]]) -> list[dict[str, int]]:
        return align_fractions(frac_bits, self.blocks)

    # -- float warm-up

    def _conv(self, weights, layer: int, x: np.ndarray) -> np.ndarray:
        _, _, _, stride, oh, ow, _ = self.layers[layer]
        self.host_macs += x.shape[0] * weights[layer].size * oh * ow
        return conv2d(x, weights[layer], stride)

    def _float_forward(self, x: np.ndarray, weights=None) -> tuple[list[np.ndarray], list[np.ndarray]]:
        weights = self.weights if weights is None else weights
        inputs, pre, a = [None] * len(self.layers), [None] * len(self.layers), x
        for stage in self.stages:
            if isinstance(stage, int):
                inputs[stage] = self._inputs(a, stage)
                pre[stage] = self._conv(weights, stage, inputs[stage])
            else:
                c1, c2, p = stage.first, stage.second, stage.projection
                inputs[c1] = a
                pre[c1] = self._conv(weights, c1, a)
                inputs[c2] = np.maximum(pre[c1], 0.0)
                shortcut = a
                if p is not None:
                    inputs[p] = a
                    shortcut = pre[p] = self._conv(weights, p, a)
                pre[c2] = self._conv(weights, c2, inputs[c2]) + shortcut
            a = np.maximum(pre[stage_out(stage)], 0.0)
        return inputs, pre

    def _float_grads(self, inputs, layer: int, dz: np.ndarray, grads: list, measuring: bool) -> np.ndarray:
        """Layer ``layer``'s weight gradient into ``grads`` and its input's gradient, recording the scales."""
        if measuring:
            for blob, values in (("activation", inputs[layer]), ("weight", self.weights[layer]), ("error", dz)):
                self._record(layer, blob, values)
        grads[layer], dx = conv2d_grads(inputs[layer], self.weights[layer], dz, self.layers[layer][3],
                                        input_grad=layer > 0)
        self.host_macs += (1 + (layer > 0)) * dz.shape[0] * self.weights[layer].size * np.prod(dz.shape[2:])
        return dx

    def _float_step(self, x: np.ndarray, y: np.ndarray) -> float:
        measuring = self.epoch == self.setup.warmup_epochs - 1
        inputs, pre = self._float_forward(x)
        loss, grad = softmax_cross_entropy(pre[-1].reshape(x.shape[0], -1), y)
        dz, grads = grad.reshape(pre[-1].shape), [None] * len(self.layers)
        for index in reversed(range(len(self.stages))):
            stage = self.stages[index]
            if isinstance(stage, int):
                dx = self._float_grads(inputs, stage, dz, grads, measuring)
            else:
                dh = self._float_grads(inputs, stage.second, dz, grads, measuring)
                dx = self._float_grads(inputs, stage.first, dh * (pre[stage.first] > 0), grads, measuring)
                dx = dx + (dz if stage.projection is None else
                           self._float_grads(inputs, stage.projection, dz, grads, measuring))
            if index:
                below = pre[stage_out(self.stages[index - 1])]
                dz = dx.reshape(below.shape) * (below > 0)
        rate = self.learning_rate()
        self.weights = [w - rate * g for w, g in zip(self.weights, grads)]
        return loss

    def _kernel_norms(self) -> list[np.ndarray]:
        """Every conv's kernels, projections included (the head, last, is never pruned)."""
        return [np.sqrt(np.square(w).sum(axis=(2, 3))) for w in self.weights[:-1]]

    # -- fixed point

    def _fp(self, layer: int, codes: np.ndarray) -> np.ndarray:
        _, _, k, stride, *_ = self.layers[layer]
        return np.asarray(self.backend.forward(self.matrix(layer), pad_map(codes, k), stride), dtype=np.int64)

    def _sum_frac(self, layer: int, blob: str) -> int:
        return self.frac_bits[layer]["weight"] + self.frac_bits[layer][blob]

    def _fixed_forward(self, x: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
        fb = self.frac_bits
        inputs, pre = [None] * len(self.layers), [None] * len(self.layers)
        a = quantize(x, fb[0]["activation"])
        for index, stage in enumerate(self.stages):
            if isinstance(stage, int):
                inputs[stage] = self._inputs(a, stage)
                pre[stage] = self._fp(stage, inputs[stage])
            else:
                c1, c2, p = stage.first, stage.second, stage.projection
                inputs[c1] = a
                pre[c1] = self._fp(c1, a)
                inputs[c2] = rescale(np.maximum(pre[c1], 0), self._sum_frac(c1, "activation"), fb[c2]["activation"])
                if p is None:
                    shortcut = a.astype(np.int64) << shortcut_shifts(fb, stage)[0]
                else:
                    inputs[p] = a
                    shortcut = self._fp(p, a)
                pre[c2] = self._fp(c2, inputs[c2]) + shortcut
            if index < len(self.stages) - 1:
                out = stage_out(stage)
                a = rescale(np.maximum(pre[out], 0), self._sum_frac(out, "activation"),
                            fb[stage_in(self.stages[index + 1])]["activation"])
        return inputs, pre

    def _wg(self, inputs, layer: int, dz: np.ndarray) -> np.ndarray:
        _, _, k, stride, *_ = self.layers[layer]
        return np.asarray(self.backend.weight_grad(self.matrix(layer), pad_map(inputs[layer], k), dz, stride),
                          dtype=np.int64)

    def _block_errors(self, inputs, pre, stage: ResidualBlock, dz2: np.ndarray, grads: list) -> np.ndarray:
        """A block's gradients into ``grads`` and its input's error sums (at conv1's EB fraction), from conv2's
        error codes ``dz2``."""
        c1, c2, p = stage.first, stage.second, stage.projection
        grads[c2] = self._wg(inputs, c2, dz2)
        dh = np.where(pre[c1] > 0, self._input_error(c2, dz2, inputs[c2].shape[1:]), 0)
        dz1 = rescale(dh, self._sum_frac(c2, "error"), self.frac_bits[c1]["error"])
        grads[c1] = self._wg(inputs, c1, dz1)
        dx = self._input_error(c1, dz1, inputs[c1].shape[1:])
        if p is None:
            return dx + (dz2.astype(np.int64) << shortcut_shifts(self.frac_bits, stage)[1])
        grads[p] = self._wg(inputs, p, dz2)
        return dx + self._input_error(p, dz2, inputs[p].shape[1:])

    def _fixed_step(self, x: np.ndarray, y: np.ndarray) -> float:
        inputs, pre = self._fixed_forward(x)
        loss, dz = self._loss_and_codes(pre[-1].reshape(x.shape[0], -1), y)
        dz, grads = dz.reshape(pre[-1].shape), [None] * len(self.layers)
        for index in reversed(range(len(self.stages))):
            stage = self.stages[index]
            if isinstance(stage, int):
                grads[stage] = self._wg(inputs, stage, dz)
                if not index:
                    break
                dx, frac = self._input_error(stage, dz, inputs[stage].shape[1:]), self._sum_frac(stage, "error")
            else:
                dx, frac = self._block_errors(inputs, pre, stage, dz, grads), self._sum_frac(stage.first, "error")
            below = stage_out(self.stages[index - 1])
            dx = np.where(pre[below] > 0, dx.reshape(pre[below].shape), 0)
            dz = rescale(dx, frac, self.frac_bits[below]["error"])
        self._update_all(grads)
        return loss


__all__ = ["CsbResNetSetup", "CsbResNetTrainer"]
