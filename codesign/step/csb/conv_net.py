"""A conv network's layers on the CSB PE: plain convs, residual blocks and the head, and the fractions that let a
block's shortcut add in place.

The convs are 'same'-padded convs of the PE's kernel at stride 1 or 2, each followed by a ReLU; the head is a dense
layer over the last map's features, run as a 1 x 1 conv on a 1 x 1 map (:func:`net_shapes`). A basic block
(ResNet's, without batch norm) is ``out = relu(conv2(relu(conv1(x))) + shortcut(x))``: ``conv1`` of the PE's
kernel at stride 1 or 2, ``conv2`` at stride 1, and the shortcut the identity where the block keeps its shape,
else a trainable 1 x 1 conv at the block's stride (a *projection*, run under ``K1``).

The PE adds the shortcut where its sums already are: ``conv2``'s FP chain starts from the shortcut's sums, and
``conv1``'s EB from the shortcut's error. For that the two addends must share a fraction:

* forward: ``conv2``'s sums are at ``fw2 + fa_h``; the identity adds ``x * 2^jf`` (``x`` at ``fa_x``) with
  ``jf = fw2 + fa_h - fa_x``, a K1 FP of the constant diagonal code ``2^jf``; a projection's sums are at
  ``fw_p + fa_x``, so ``fw_p = fw2 + fa_h - fa_x``;
* backward: ``conv1``'s EB sums are at ``fw1 + fe1``; the identity adds ``dz2 * 2^jb`` (``dz2`` at ``fe2``) with
  ``jb = fw1 + fe1 - fe2``; a projection's EB sums are at ``fw_p + fe2``, so ``fw_p = fw1 + fe1 - fe2``.

An 8-bit code holds ``2^j`` for ``j`` in 0..6, so :func:`align_fractions` moves the scales the warm-up measured
until every block meets these: it only ever *lowers* a fraction (a coarser grid never saturates). The shortcut's
extra term in every such sum is counted by :func:`shortcut_terms` where the loop checks that no sum can saturate.
Units: fractions in bits; layer indices into the network's layer list (the convs, the blocks' layers, the head).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple, Union

from codesign.numerics.records import keyword_record
from codesign.pe.csb.spec import CsbSpec
from codesign.step.csb.conv_arena import ConvShape

IDENTITY_SHIFT_RANGE = (0, 6)  # 2^j as an 8-bit code: 1 .. 64


@keyword_record
class ResidualBlock:
    """A block's layers: ``conv1`` at ``first``, ``conv2`` right after it, and its ``projection`` (a layer index,
    None for the identity)."""

    first: int
    projection: Optional[int] = None

    @property
    def second(self) -> int:
        return self.first + 1

    @property
    def layers(self) -> Tuple[int, ...]:
        return (self.first, self.second) + (() if self.projection is None else (self.projection,))


def net_shapes(spec: CsbSpec, image: Tuple[int, int, int], convs: Sequence[Tuple[int, int]],
               classes: int) -> List[ConvShape]:
    """The layers' shapes on ``spec`` of a network without blocks: the convs, then the head (the last map's
    features as channels of a 1 x 1 map, a 1 x 1 conv)."""
    return resnet_shapes(spec, image, convs, (), classes)[0]


def resnet_shapes(spec: CsbSpec, image: Tuple[int, int, int], convs: Sequence[Tuple[int, int]],
                  blocks: Sequence[Tuple[int, int]], classes: int) -> Tuple[List[ConvShape], Tuple[ResidualBlock, ...]]:
    """The layers of ``convs`` (plain, each followed by a ReLU), then of ``blocks`` (``(outputs, stride)`` each:
    conv1, conv2 and, where the shape changes, the projection), then the head (the last map's features as a 1 x 1
    map); and the blocks by layer index."""
    if blocks and not convs:
        raise ValueError("a network's blocks follow at least one plain conv (the stem): its input takes no error")
    (c, h, w), layers, found = image, [], []
    for outputs, stride in convs:
        layers.append(ConvShape(channels=c, outputs=outputs, height=h, width=w, kernel=spec.kernel, stride=stride))
        c, (h, w) = outputs, layers[-1].out_map
    for outputs, stride in blocks:
        first = ConvShape(channels=c, outputs=outputs, height=h, width=w, kernel=spec.kernel, stride=stride)
        oh, ow = first.out_map
        layers += [first, ConvShape(channels=outputs, outputs=outputs, height=oh, width=ow, kernel=spec.kernel)]
        projection = None
        if stride != 1 or outputs != c:
            projection = len(layers)
            layers.append(ConvShape(channels=c, outputs=outputs, height=h, width=w, kernel=1, stride=stride))
        found.append(ResidualBlock(first=len(layers) - 2 - (projection is not None), projection=projection))
        c, h, w = outputs, oh, ow
    head = ConvShape(channels=c * h * w, outputs=classes, height=1, width=1, kernel=1)
    return layers + [head], tuple(found)


Stage = Union[int, ResidualBlock]


def net_stages(layers: int, blocks: Sequence[ResidualBlock]) -> List[Stage]:
    """The network of ``layers`` layers as stages, each reading the ReLU of the one before: a plain layer (a conv,
    then the head, last) by index, or a block."""
    return list(range(blocks[0].first if blocks else layers - 1)) + list(blocks) + [layers - 1]


def stage_out(stage: Stage) -> int:
    """The layer whose sums are a stage's output, before its ReLU."""
    return stage.second if isinstance(stage, ResidualBlock) else stage


def stage_in(stage: Stage) -> int:
    """The layer whose input grid holds a stage's input (a block's projection reads it there too)."""
    return stage.first if isinstance(stage, ResidualBlock) else stage


def _lower(fracs: List[Dict[str, int]], layer: int, blob: str, to: int) -> None:
    fracs[layer][blob] = min(fracs[layer][blob], to)


def _needs(fracs: Sequence[Dict[str, int]], block: ResidualBlock) -> Tuple[int, int]:
    """``(jf, jb)``: the shortcut weight fractions that put its forward addend at conv2's sums' fraction and its
    backward addend at conv1's EB sums' (an identity's ``2^j`` codes; a projection's ``fw_p`` must meet both)."""
    c1, c2 = fracs[block.first], fracs[block.second]
    return c2["weight"] + c2["activation"] - c1["activation"], c1["weight"] + c1["error"] - c2["error"]


def align_fractions(frac_bits: Sequence[Dict[str, int]], blocks: Sequence[ResidualBlock]) -> List[Dict[str, int]]:
    """``frac_bits`` (per layer: ``activation``, ``weight``, ``error``) with every block's shortcut aligned (module
    docstring): the projection shares conv1's input fraction and conv2's error fraction; an identity's shifts fall
    in 0..6 and a projection's weight fraction meets both sums. Fractions only go down."""
    fracs = [dict(entry) for entry in frac_bits]
    low, high = IDENTITY_SHIFT_RANGE
    for block in blocks:
        c1, c2, p = fracs[block.first], fracs[block.second], block.projection
        if p is not None:
            for layer, blob, other in ((p, "activation", c1), (p, "error", c2)):
                other[blob] = fracs[layer][blob] = min(fracs[layer][blob], other[blob])
            jf, jb = _needs(fracs, block)
            fw = fracs[p]["weight"] = min(fracs[p]["weight"], jf, jb)
            c2["activation"] -= jf - fw
            c1["error"] -= jb - fw
            continue
        jf, jb = _needs(fracs, block)
        _lower(fracs, block.second, "activation", c2["activation"] - max(0, jf - high))
        _lower(fracs, block.first, "activation", c1["activation"] + min(0, jf - low))
        _lower(fracs, block.first, "error", c1["error"] - max(0, jb - high))
        _lower(fracs, block.second, "error", c2["error"] + min(0, jb - low))
    return fracs


def shortcut_shifts(frac_bits: Sequence[Dict[str, int]], block: ResidualBlock) -> Tuple[int, int]:
    """An aligned identity block's ``(jf, jb)``: the forward adds ``x * 2^jf`` to conv2's sums, the backward
    ``dz2 * 2^jb`` to conv1's EB sums."""
    shifts = _needs(frac_bits, block)
    if not all(IDENTITY_SHIFT_RANGE[0] <= j <= IDENTITY_SHIFT_RANGE[1] for j in shifts):
        raise ValueError(f"block at layer {block.first}: shortcut shifts {shifts} are not aligned (0..6)")
    return shifts


def check_aligned(frac_bits: Sequence[Dict[str, int]], blocks: Sequence[ResidualBlock]) -> None:
    """Raise ValueError unless every block's shortcut adds in place at ``frac_bits``."""
    for block in blocks:
        if block.projection is None:
            shortcut_shifts(frac_bits, block)
            continue
        c1, c2, p = (frac_bits[i] for i in block.layers)
        if set(_needs(frac_bits, block)) != {p["weight"]} or p["activation"] != c1["activation"] \
                or p["error"] != c2["error"]:
            raise ValueError(f"block at layer {block.first}: its projection's sums are not at conv2's and conv1's "
                             f"fractions (it needs weight fractions {_needs(frac_bits, block)}, has {p['weight']})")


def shortcut_terms(shapes: Sequence[ConvShape], block: ResidualBlock) -> int:
    """The products (or the one shifted code) a shortcut adds to each of conv2's sums and conv1's EB sums."""
    if block.projection is None:
        return 1
    p = shapes[block.projection]
    return max(p.channels, p.outputs)


__all__ = ["IDENTITY_SHIFT_RANGE", "ResidualBlock", "Stage", "align_fractions", "check_aligned", "net_shapes",
           "net_stages", "resnet_shapes", "shortcut_shifts", "shortcut_terms", "stage_in", "stage_out"]
