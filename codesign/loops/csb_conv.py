"""Golden compressed training of a conv network on the CSB PE: 'same' convs with ReLU, residual blocks, a dense head.

The conv analogue of :class:`codesign.loops.csb.CsbMlpTrainer` (paper 002 trains VGG-11 this way: convs and
fully connected layers, no batch norm), and what the conv call lists (:mod:`codesign.step.csb.conv_step`)
compute, so a board's run can be compared with it bit for bit. The network (:mod:`codesign.step.csb.conv_net`):
convs of the PE's odd kernel, each 'same'-padded at stride 1 or 2 (the PE's ``S2``) and followed by a ReLU; then
ResNet's basic blocks, if any, without batch norm (``out = relu(conv2(relu(conv1(x))) + shortcut(x))``, the
shortcut the identity or a 1 x 1 projection at the block's stride; ResNet-8's layers are one conv and three
blocks); then a head over the last map's features (a 1 x 1 conv on a 1 x 1 map: an FC layer). Every layer is a
4-D weight ``(outputs, channels, k, k)``; the head's and a projection's ``k`` is 1.

Phases as the MLP loop's: a float64 warm-up on the host (:mod:`codesign.loops.conv_float`) measuring max|.|
of every layer's input, weight and output error in its last epoch; at its end the scales (power-of-two fraction
bits, lowered where a block's shortcut needs it: :func:`~codesign.step.csb.conv_net.align_fractions`) and the
kernel-wise pruning search (a kernel ``weight[o, c]`` by its L2 norm, every conv's, projections included; the
head is never pruned, as in the torch technique); then fixed-point steps with every product on the backend
(golden: :class:`codesign.loops.csb_backend.FastConvCsb`, the golden layer's sums through matrix products,
exact here; :class:`~codesign.loops.csb_backend.GoldenConvCsb` runs the PE's block operations):

- codes at ``fa_0``; per layer FP on the input padded by ``(k - 1) / 2`` (32-bit sums at ``fw + fa``); a block's
  conv2 sums plus its shortcut's, added in place: the identity's ``x * 2^jf`` or the projection's FP, at the same
  fraction; every stage's output ReLU and ``rescale`` to the next ``fa`` (rne, saturating);
- the loss of the logits, its gradient rounded once to codes at the head's ``fe``;
- per layer WG (stored kernels only) and EB: ``W^T dz`` at the input's positions, a block's conv1 sums plus its
  shortcut's (``dz2 * 2^jb`` or the projection's EB), masked by the sign of the sums that made the input,
  rescaled to that layer's ``fe``;
- UPD per layer after every product: plain SGD at a power-of-two rate, as the MLP loop.

The layers' sums are the one-tile golden model's. The conv lists add WG's and EB's products tile by tile (and a
shortcut's onto its block's), which equals it wherever no partial sum saturates: the set-up refuses a network and
batch whose sums could (a product of two 8-bit codes is at most ``2^14``; a sum takes at most ``channels * k^2``
of them in FP, ``outputs * k^2`` in EB and ``batch * positions`` in WG, plus a shortcut's terms).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, List, Tuple

import numpy as np

from codesign.loops.common import MAX_WIDTH, HwTrainError, LoopSetup, int_in, softmax_cross_entropy
from codesign.loops.conv_float import conv2d, conv2d_grads, pad_map
from codesign.loops.csb import BUFFER_EXTRA_BITS, CompressedLoop, quantize, rescale
from codesign.loops.csb_backend import FastConvCsb
from codesign.loops.pruning import ORDERS
from codesign.pe.csb.format import CSBMatrix
from codesign.pe.csb.spec import CsbSpec
from codesign.step.csb.conv_net import (ResidualBlock, align_fractions, check_aligned, net_stages, resnet_shapes,
                                        shortcut_shifts, shortcut_terms, stage_in, stage_out)

LARGEST_PRODUCT = 128 * 128  # |a * b| of two 8-bit codes


@dataclass(frozen=True)
class CsbConvSetup(LoopSetup):
    """The CSB PE's spec (its kernel is the convs'), the input ``image`` (channels, height, width), the convs as
    ``(outputs, stride)``, the classes, SGD and the warm-up and pruning search (as :class:`CsbTrainSetup`), and the
    residual ``blocks`` after the convs as ``(outputs, stride)`` (none: a plain network)."""

    spec_class = CsbSpec
    list_fields = ("image", "convs")
    optional_list_fields = ("blocks",)

    spec: CsbSpec
    image: Tuple[int, int, int]
    convs: Tuple[Tuple[int, int], ...]
    classes: int
    batch_size: int
    epochs: int
    warmup_epochs: int
    lr: float
    schedule: str
    seed: int
    drop_budget: float = 2.0
    step_percent: int = 10
    max_percent: int = 90
    order: str = "largest_first"
    validation_fraction: float = 0.2
    split_seed: int = 0
    blocks: Tuple[Tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.spec, CsbSpec) or self.spec.kernel % 2 == 0:
            raise HwTrainError(f"spec must be a CsbSpec of an odd kernel, got {self.spec!r}")
        self.check_shared(widths=False)
        try:  # lists as design.json holds them: kept as tuples (the set-up keys a device arena)
            object.__setattr__(self, "image", tuple(self.image))
            object.__setattr__(self, "convs", tuple(tuple(conv) for conv in self.convs))
            object.__setattr__(self, "blocks", tuple(tuple(block) for block in self.blocks))
        except TypeError:
            raise HwTrainError(f"image {self.image!r}, convs {self.convs!r} and blocks {self.blocks!r} must be "
                               "sequences") from None
        if len(self.image) != 3 or not all(int_in(v, 1, MAX_WIDTH) for v in self.image):
            raise HwTrainError(f"image {self.image!r} must be (channels, height, width), ints in [1, {MAX_WIDTH}]")
        check_stride_pairs("convs", self.convs, self.spec)
        if self.blocks:
            check_stride_pairs("blocks", self.blocks, self.spec)
        if not int_in(self.classes, 2, MAX_WIDTH):
            raise HwTrainError(f"classes {self.classes!r} must be an int in [2, {MAX_WIDTH}]")
        if not isinstance(self.warmup_epochs, int) or not 1 <= self.warmup_epochs < self.epochs:
            raise HwTrainError(f"warmup_epochs {self.warmup_epochs!r} must be an int in 1..epochs - 1")
        if self.order not in ORDERS or not 1 <= self.step_percent <= 100 or not 0 <= self.max_percent <= 100 \
                or self.drop_budget < 0 or not 0 < self.validation_fraction < 1:
            raise HwTrainError("pruning search: order, step_percent 1..100, max_percent 0..100, drop_budget >= 0, "
                               "validation_fraction in (0, 1)")
        terms = self.largest_sum_terms()
        if terms * LARGEST_PRODUCT > (1 << (self.spec.acc_bits - 1)) - 1:
            raise HwTrainError(f"a sum of {terms} products could saturate {self.spec.acc_bits}-bit accumulators, and "
                               "the conv lists would then add WG's and EB's products in another order than this loop")

    def largest_sum_terms(self) -> int:
        """The most products one sum of the network takes: ``channels * k^2`` in FP, ``outputs * k^2`` in EB,
        ``batch * positions`` in WG, and a block's shortcut's besides."""
        shapes, blocks = self.shapes_and_blocks
        extra = max((shortcut_terms(shapes, block) for block in blocks), default=0)
        return extra + max(max(c * k * k, o * k * k, self.batch_size * h * w)
                           for c, o, k, _, h, w, _ in self.layer_maps)

    @property
    def shapes_and_blocks(self):
        """The layers' :class:`~codesign.step.csb.conv_arena.ConvShape` and the blocks by layer index
        (:func:`codesign.step.csb.conv_net.resnet_shapes`)."""
        return resnet_shapes(self.spec, self.image, self.convs, self.blocks, self.classes)

    @property
    def layer_maps(self) -> List[Tuple[int, int, int, int, int, int, int]]:
        """Per layer ``(channels, outputs, kernel, stride, out_h, out_w, in positions)``: the convs, the blocks'
        layers (conv1, conv2, a projection), then the head (kernel 1 on a 1 x 1 map of the last map's features)."""
        shapes, _ = self.shapes_and_blocks
        return [(s.channels, s.outputs, s.kernel, s.stride, *s.out_map, s.height * s.width) for s in shapes]

    @property
    def features(self) -> int:
        return int(np.prod(self.image))


def check_stride_pairs(name: str, pairs, spec: CsbSpec) -> None:
    """Refuse ``pairs`` (the field ``name``) unless they are ``(outputs, stride)`` pairs, at least one, each stride
    one the PE runs."""
    if not pairs or not all(len(pair) == 2 and int_in(pair[0], 1, MAX_WIDTH) and int_in(pair[1], 1, 2)
                            for pair in pairs):
        raise HwTrainError(f"{name} {pairs!r} must be (outputs in [1, {MAX_WIDTH}], stride 1 or 2) pairs, "
                           "at least one")
    if max(s for _, s in pairs) > spec.max_stride:
        raise HwTrainError(f"{name} {pairs!r}: stride 2 needs a PE built with max_stride 2, not {spec.max_stride}")


def kernel_mask(mask: np.ndarray, kernel: int) -> np.ndarray:
    """The kept kernels of a ``(outputs, channels)`` mask as :func:`encode` takes them: ``kernel x kernel`` ones."""
    return np.broadcast_to(mask[:, :, None, None], (*mask.shape, kernel, kernel)).astype(np.int8)


class CsbConvTrainer(CompressedLoop):
    """Compressed conv training: float64 warm-up on the host, then every layer product on ``backend``, each block's
    shortcut added in place."""

    def __init__(self, setup: CsbConvSetup, backend=None) -> None:
        self.setup, self.spec = setup, setup.spec
        self.backend = backend if backend is not None else FastConvCsb(setup.spec)
        self.layers = setup.layer_maps
        self.blocks = setup.shapes_and_blocks[1]
        self.stages = net_stages(len(self.layers), self.blocks)  # each reads the ReLU of the one before
        self.phase, self.step, self.epoch, self.fixed_steps = "warmup", 0, 0, 0
        self.history: list[dict[str, Any]] = []
        self.steps_per_epoch: int | None = None
        self.max_abs: list[dict[str, float]] = [{} for _ in self.layers]
        self.frac_bits: list[dict[str, int]] = []
        self.masks: list[np.ndarray] = []
        self.buffers: list[np.ndarray] = []  # per layer: (nnz, k, k) 24-bit words of the stored kernels
        self._structure: list[CSBMatrix] = []
        self.search_log: list[dict[str, Any]] = []
        self.host_macs = self.search_macs = 0
        self.lr_exponents: list[int] = []
        rng = np.random.default_rng(setup.seed)
        # He's uniform initialisation: a ReLU network's activations keep their scale layer after layer
        self.weights = [rng.uniform(-1, 1, (o, c, k, k)) * math.sqrt(6 / (c * k * k)) for c, o, k, *_ in self.layers]

    @property
    def features(self) -> int:
        return self.setup.features

    @property
    def classes(self) -> int:
        return self.setup.classes

    @property
    def shapes(self) -> list[tuple[int, int, int, int]]:
        """Each layer's weight shape ``(outputs, channels, k, k)`` (the head's ``k`` is 1)."""
        return [(o, c, k, k) for c, o, k, *_ in self.layers]

    # -- fixed-point state

    def matrix(self, layer: int) -> CSBMatrix:
        """Layer ``layer``'s CSB matrix as the PE reads it: the top 8 bits of every buffer word."""
        s = self._structure[layer]
        values = (self.buffers[layer] >> BUFFER_EXTRA_BITS).astype(np.int8)
        return CSBMatrix(shape=s.shape, kernel=s.kernel, block_rows=s.block_rows, block_cols=s.block_cols,
                         block_ptr=s.block_ptr, index=s.index, values=values, conv=True)

    def _kernels(self, layer: int, mask: np.ndarray) -> np.ndarray:
        return kernel_mask(mask, self.layers[layer][2])

    # -- inputs

    def _batch(self, x, y=None) -> tuple[np.ndarray, np.ndarray | None]:
        x = np.asarray(x.numpy() if hasattr(x, "numpy") else x, dtype=np.float64)
        if x.ndim < 2 or x.shape[0] < 1 or int(np.prod(x.shape[1:])) != self.features:
            raise HwTrainError(f"batch x has shape {x.shape}: need n samples of {self.setup.image} values")
        x = x.reshape(x.shape[0], *self.setup.image)
        if not np.isfinite(x).all():
            raise HwTrainError("batch x holds values that are not finite")
        if y is None:
            return x, None
        y = np.asarray(y.numpy() if hasattr(y, "numpy") else y, dtype=np.int64)
        if y.shape != (x.shape[0],) or y.min() < 0 or y.max() >= self.classes:
            raise HwTrainError(f"labels y of shape {y.shape} must be ({x.shape[0]},) classes in 0..{self.classes - 1}")
        return x, y

    def _inputs(self, a: np.ndarray, layer: int) -> np.ndarray:
        """A layer's input: the map before it, flattened to a 1 x 1 map of features for the head."""
        return a.reshape(a.shape[0], -1, 1, 1) if layer == len(self.layers) - 1 else a

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
        """What the pruning search ranks: every conv's kernels by L2 norm, projections included (the head, last, is
        never pruned, as in the torch technique)."""
        return [np.sqrt(np.square(w).sum(axis=(2, 3))) for w in self.weights[:-1]]

    def _masked(self, masks: list[np.ndarray]) -> list[np.ndarray]:
        return [w * m[:, :, None, None] for w, m in zip(self.weights, masks)] + self.weights[len(masks):]

    def _aligned(self, frac_bits: list[dict[str, int]]) -> list[dict[str, int]]:
        return align_fractions(frac_bits, self.blocks)

    def _set_fixed(self, masks, dense_buffers, frac_bits) -> None:
        """The switch to fixed point, refused where a block's shortcut could not add in place at ``frac_bits``."""
        try:
            check_aligned(frac_bits, self.blocks)
        except ValueError as error:
            raise HwTrainError(f"fixed point: {error}") from None
        super()._set_fixed(masks, dense_buffers, frac_bits)

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

    def _input_error(self, index: int, dz: np.ndarray, shape: Tuple[int, int, int]) -> np.ndarray:
        """EB of layer ``index`` at the positions of its input map ``(channels, height, width)``."""
        _, _, k, stride, *_ = self.layers[index]
        (c, h, w), p = shape, (k - 1) // 2
        full = self.backend.backward_error_on(self.matrix(index), dz, (dz.shape[0], c, h + 2 * p, w + 2 * p), stride)
        return np.asarray(full, dtype=np.int64)[:, :, p:p + h, p:p + w]

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


__all__ = ["CsbConvSetup", "CsbConvTrainer", "check_stride_pairs", "kernel_mask"]
