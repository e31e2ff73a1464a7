"""A conv network's CSB training step (the compressed ResNet): its layers as the CSB PE computes them, and the host's share.

The CSB board loop (:mod:`codesign.loops.csb`) trains MLPs; a conv network
trains in the golden trainer only, so the whole-step model takes what it
needs from there:

* **The kept kernels.** :func:`pruned_trainer` runs the configuration's
  warm-up epochs; at the end of the last one the compress technique's
  pruning search fixes the kernel masks every fixed-point step works on.
* **The layers.** :func:`conv_layers` follows one forward pass and gives
  every counted layer as a :class:`~codesign.step.csb.time.CsbLayer`
  ('same'-padded convs only): a 3 x 3 conv over its input's map, a stride-2
  one at stride 2 on a build with ``max_stride`` 2 (else at stride 1 and
  subsampled by the host, four times its useful MACs on the PE), a 1 x 1 conv
  on the map the host subsampled for it and the FC head as a 1 x 1 map, both
  under header ``K1`` (one tap an entry) on a build of a larger kernel.
* **The host's share** (:func:`measure_conv_host`): a fixed-point golden
  step less its convolutions and the head, each timed alone at the same
  shapes, forward and both gradients (batch norm, ReLU, pooling, the loss,
  the optimiser and the rounding to 8 bits stay on the host), plus the
  encoding of one FP transaction per PE call. It is this machine's figure, a
  lower bound for a board's ARM core; the host's work of cutting the tiles
  out of the maps is not in it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from codesign.step.csb.time import CsbLayer
from codesign.loops.host_share import THIS_MACHINE, csb_encoding_seconds
from codesign.step.host import HostModel
from codesign.pe.csb.format import encode
from codesign.pe.csb.spec import CsbSpec


def pruned_trainer(training, progress: Callable[[str], None] = print):
    """The golden trainer of ``training`` (a compressed conv network) after its warm-up epochs and pruning."""
    from codesign.train.trainer import Trainer

    compress = training.techniques.get("compress")
    if compress is None:
        raise ValueError("a conv network's CSB step needs techniques.compress (its kernel masks)")
    progress(f"the golden trainer's warm-up ({compress.warmup_epochs} epochs) and pruning search, for the kept kernels")
    trainer = Trainer(training, progress=False, description="warm-up")
    trainer.fit(until_epoch=compress.warmup_epochs)
    return trainer


def _technique(trainer, name: str):
    for technique in trainer.techniques:
        if technique.name == name:
            return technique
    raise ValueError(f"the trainer has no {name} technique")


def layer_inputs(trainer) -> list[tuple[str, Any, tuple[int, ...]]]:
    """``(name, module, input shape)`` of every counted layer, in the order one forward pass calls them, on the first
    batch of the training set."""
    import torch

    from codesign.train.layers import counted_layers

    seen: list[tuple[str, Any, tuple[int, ...]]] = []
    handles = [layer.register_forward_pre_hook(
        lambda module, args: seen.append((module.layer_name, module, tuple(args[0].shape))))
        for layer in counted_layers(trainer.model)]
    try:
        with torch.no_grad():
            trainer.model.eval()
            trainer.model(trainer.dataset.train_x[:trainer.config.optim.batch_size])
    finally:
        trainer.model.train()
        for handle in handles:
            handle.remove()
    return seen


def conv_layers(trainer) -> list[CsbLayer]:
    """The counted layers of ``trainer``'s model as the CSB PE computes them (see the module's docstring), with the
    compress technique's kernel masks (a layer it does not prune keeps every kernel)."""
    import torch

    masks = _technique(trainer, "compress").masks
    layers = []
    for name, module, shape in layer_inputs(trainer):
        keep = masks.get(name)
        if isinstance(module, torch.nn.Conv2d):
            kernel, stride = module.kernel_size[0], module.stride[0]
            if module.kernel_size[1] != kernel or module.stride[1] != stride or \
                    module.padding != ((kernel - 1) // 2,) * 2 or kernel % 2 == 0 or module.groups != 1:
                raise ValueError(f"layer {name}: only 'same'-padded square convs of odd kernel map onto the CSB PE")
            height, width = shape[2], shape[3]
            out_h, out_w = -(-height // stride), -(-width // stride)
            keep = np.ones((module.out_channels, module.in_channels), bool) if keep is None else keep.numpy()
            map_h, map_w = (height, width) if kernel > 1 else (out_h, out_w)
            layers.append(CsbLayer(mask=keep, height=map_h, width=map_w, kernel=kernel, positions=out_h * out_w,
                                   stride=stride if kernel > 1 else 1))
        elif isinstance(module, torch.nn.Linear):
            keep = np.ones((module.out_features, module.in_features), bool) if keep is None else keep.numpy()
            layers.append(CsbLayer(mask=keep))
        else:
            raise ValueError(f"layer {name}: a {type(module).__name__} has no CSB mapping")
    return layers


def _pe_seconds(module, shape: tuple[int, ...], *, input_grad: bool) -> float:
    """Seconds of one layer's PE work in the golden framework: its forward op and its gradients (the input's unless
    the layer takes the network's input), on random operands of the step's shapes."""
    import torch
    import torch.nn.functional as F

    x = torch.randn(shape, requires_grad=input_grad)
    weight = module.weight.detach().clone().requires_grad_(True)
    if isinstance(module, torch.nn.Conv2d):
        def forward():
            return F.conv2d(x, weight, stride=module.stride, padding=module.padding)
    else:
        def forward():
            return F.linear(x, weight)
    grad = torch.randn_like(forward())
    started = time.perf_counter()
    out = forward()
    torch.autograd.grad(out, (x, weight) if input_grad else (weight,), grad)
    return time.perf_counter() - started


def measure_conv_host(trainer, spec: CsbSpec, layers: list[CsbLayer], *, source: str = THIS_MACHINE,
                      repeats: int = 3, samples: int = 16, seed: int = 0) -> HostModel:
    """:class:`HostModel` of a pruned conv trainer (:func:`pruned_trainer`): a fixed-point golden step less its PE
    layers (each the least of ``repeats``) as the fixed part; per call, the encoding of an FP transaction on the
    fullest blocks of the layer with most kernels (the first ``samples``)."""
    if _technique(trainer, "compress").phase != "fixed":
        raise ValueError("the trainer has not reached its fixed-point steps (run pruned_trainer first)")
    batch = trainer.config.optim.batch_size
    x, y = trainer.dataset.train_x[:batch], trainer.dataset.train_y[:batch]
    inputs = layer_inputs(trainer)
    step = min(_timed(lambda: trainer.train_step(x, y)) for _ in range(repeats))
    pe = sum(min(_pe_seconds(module, shape, input_grad=index > 0) for _ in range(repeats))
             for index, (_, module, shape) in enumerate(inputs))
    widest = max(layers, key=lambda layer: layer.mask.size)
    rng = np.random.default_rng(seed)
    codes = rng.integers(-128, 128, (*widest.mask.shape, spec.kernel, spec.kernel)) * widest.mask[:, :, None, None]
    matrix = encode(codes.astype(np.int64), block_rows=spec.block_rows, block_cols=spec.block_cols)
    blocks = sorted((block for block in matrix.blocks() if block.nnz), key=lambda block: -block.nnz)[:samples]
    return HostModel(fixed_s=max(0.0, step - pe), per_call_s=csb_encoding_seconds(spec, blocks), source=source)


def _timed(work: Callable[[], Any]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


__all__ = ["conv_layers", "layer_inputs", "measure_conv_host", "pruned_trainer"]
