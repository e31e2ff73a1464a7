"""Models sized for 8x8 digits: a CIFAR-style residual network (depth 6n+2), a conv network (with residual blocks
without batch norm, or none) and an MLP.

All convolutions and linear layers are counted layers, named by their place
in the network, so the cost ledger reads like the architecture.
"""

from __future__ import annotations

import math

from collections.abc import Callable

import torch
from torch import nn

from codesign.train.layers import CountedConv2d, CountedLinear, CountedMixin

RESNET_DEPTHS = (8, 14, 20)


class ResidualBlock(nn.Module):
    """conv3x3-BN-ReLU-conv3x3-BN plus a shortcut (1x1 conv when the shape changes); without ``batch_norm``, the
    same without the BNs (the block the CSB conv loop trains on the PE, :mod:`codesign.loops.csb_conv`)."""

    def __init__(self, in_channels: int, out_channels: int, stride: int, batch_norm: bool = True) -> None:
        super().__init__()

        def norm() -> nn.Module:
            return nn.BatchNorm2d(out_channels) if batch_norm else nn.Identity()

        self.conv1 = CountedConv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = norm()
        self.conv2 = CountedConv2d(out_channels, out_channels, 3, stride=1, padding=1, bias=False)
        self.bn2 = norm()
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(CountedConv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                                          norm())

    def residual(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))

    def forward(self, x: torch.Tensor, residual_scale: float = 1.0) -> torch.Tensor:
        """``residual_scale`` weighs the residual branch (stochastic depth's test-time rule scales it by the
        block's survival probability); at 1.0 the output is the ordinary block's, bit for bit."""
        if residual_scale == 1.0:
            return torch.relu(self.shortcut(x) + self.residual(x))
        return torch.relu(self.shortcut(x) + residual_scale * self.residual(x))

    @property
    def skippable(self) -> bool:
        """Only identity-shortcut blocks can be skipped (the output must equal the input)."""
        return isinstance(self.shortcut, nn.Identity)


BlockRunner = Callable[[int, ResidualBlock, torch.Tensor], torch.Tensor]


class ResNet(nn.Module):
    """ResNet-(6n+2) with 16/32/64 channels over 8x8, 4x4 and 2x2 maps."""

    def __init__(self, *, depth: int = 8, classes: int = 10, in_channels: int = 1, width: int = 16) -> None:
        super().__init__()
        if depth not in RESNET_DEPTHS:
            raise ValueError(f"ResNet depth {depth} is not one of {RESNET_DEPTHS}")
        per_stage = (depth - 2) // 6
        self.stem = CountedConv2d(in_channels, width, 3, padding=1, bias=False)
        self.stem.is_network_input = True
        self.stem_bn = nn.BatchNorm2d(width)
        blocks, channels = [], width
        for stage, out_channels in enumerate((width, 2 * width, 4 * width)):
            for index in range(per_stage):
                stride = 2 if stage > 0 and index == 0 else 1
                blocks.append(ResidualBlock(channels, out_channels, stride))
                channels = out_channels
        self.blocks = nn.ModuleList(blocks)
        self.head = CountedLinear(channels, classes)
        self.block_runner: BlockRunner = lambda index, block, x: block(x)
        name_layers(self)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.stem_bn(self.stem(x)))
        for index, block in enumerate(self.blocks):
            x = self.block_runner(index, block, x)
        return x.mean(dim=(2, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class LayerStack(nn.Module):
    """Flatten, then ``layers`` with ReLU between them; the first layer takes the network input (no input
    gradient). No residual blocks, so techniques that look for ``blocks`` find none."""

    def __init__(self, layers: list[nn.Module]) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.layers[0].is_network_input = True
        self.blocks = nn.ModuleList()
        name_layers(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.flatten(1)
        for layer in self.layers[:-1]:
            x = torch.relu(layer(x))
        return self.layers[-1](x)


class MLP(LayerStack):
    def __init__(self, *, inputs: int = 64, hidden: tuple[int, ...] = (128, 64), classes: int = 10) -> None:
        sizes = (inputs, *hidden, classes)
        super().__init__([CountedLinear(a, b) for a, b in zip(sizes[:-1], sizes[1:])])


class ConvNet(nn.Module):
    """'Same' 3 x 3 convs (no bias), each followed by a ReLU, then residual ``blocks`` (``(outputs, stride)``
    each, without batch norm), then a linear head (no bias) over the last map flattened channel-major: the network
    the CSB conv loop trains on the PE (:mod:`codesign.loops.csb_conv`; paper 002's VGG-11 is of this kind, without
    batch norm)."""

    def __init__(self, *, image: tuple[int, int, int] = (1, 8, 8), channels: tuple[int, ...] = (16, 16, 32, 32),
                 strides: tuple[int, ...] = (1, 1, 2, 1), classes: int = 10,
                 blocks: tuple[tuple[int, int], ...] = ()) -> None:
        super().__init__()
        if len(channels) != len(strides) or not channels:
            raise ValueError(f"a conv network needs one stride per conv: channels {channels}, strides {strides}")
        convs, (c, h, w) = [], image
        for outputs, stride in zip(channels, strides):
            convs.append(CountedConv2d(c, outputs, 3, stride=stride, padding=1, bias=False))
            c, h, w = outputs, -(-h // stride), -(-w // stride)
        convs[0].is_network_input = True
        self.convs = nn.ModuleList(convs)
        residual = []
        for outputs, stride in blocks:
            residual.append(ResidualBlock(c, outputs, stride, batch_norm=False))
            c, h, w = outputs, -(-h // stride), -(-w // stride)
        # not ``blocks``: the techniques that skip residual blocks drive a ResNet's (its ``block_runner``)
        self.residual = nn.ModuleList(residual)
        self.head = CountedLinear(c * h * w, classes, bias=False)
        self.blocks = nn.ModuleList()
        name_layers(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for conv in self.convs:
            x = torch.relu(conv(x))
        for block in self.residual:
            x = block(x)
        return self.head(x.flatten(1))


def skippable_blocks(model: nn.Module) -> list[int]:
    """Indices of the residual blocks a technique may leave out (identity shortcut) through the model's
    ``block_runner``; none for a model without one."""
    if not hasattr(model, "block_runner"):
        return []
    return [index for index, block in enumerate(getattr(model, "blocks", ())) if getattr(block, "skippable", False)]

def name_layers(model: nn.Module) -> None:
    for name, module in model.named_modules():
        if isinstance(module, CountedMixin):
            module.layer_name = name


def build_model(name: str, *, depth: int = 8, hidden: tuple[int, ...] = (128, 64), width: int = 16,
                channels: tuple[int, ...] = (16, 16, 32, 32), strides: tuple[int, ...] = (1, 1, 2, 1),
                blocks: tuple[tuple[int, int], ...] = (), sample_shape: tuple[int, ...] = (1, 8, 8),
                classes: int = 10) -> nn.Module:
    """Model ``name`` for samples of ``sample_shape`` (channels x height x width, or features) and ``classes``."""
    if name in ("resnet", "convnet") and len(sample_shape) != 3:
        raise ValueError(f"model.name = {name!r} takes images (channels x height x width); the data's samples "
                         f"are rows of {math.prod(sample_shape)} features: use model.name = 'mlp'")
    if name == "resnet":
        return ResNet(depth=depth, width=width, in_channels=sample_shape[0], classes=classes)
    if name == "convnet":
        return ConvNet(image=tuple(sample_shape), channels=tuple(channels), strides=tuple(strides), classes=classes,
                       blocks=tuple(blocks))
    if name == "mlp":
        return MLP(inputs=math.prod(sample_shape), hidden=hidden, classes=classes)
    raise ValueError(f"unknown model {name!r}; expected 'resnet', 'convnet' or 'mlp'")


def configured_model(model, *, sample_shape: tuple[int, ...], classes: int) -> nn.Module:
    """The model a :class:`~codesign.train.config.ModelConfig` describes, for the data's samples and classes."""
    return build_model(model.name, depth=model.depth, hidden=model.hidden, width=model.width,
                       channels=model.channels, strides=model.strides, blocks=model.blocks, sample_shape=sample_shape,
                       classes=classes)
