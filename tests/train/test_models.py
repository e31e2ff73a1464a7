"""The models a configuration names: the plain conv network is the CSB conv loop's (3 x 3 'same' convs without
bias, a ReLU after each, a head without bias over the last map flattened channel-major), and trains under the
compress technique; a model of images refuses rows of features."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from codesign.train.config import ModelConfig, TrainConfig, config_from_dict
from codesign.train.models import ConvNet, build_model, configured_model

EXPECTED_MASKS = {"convs.0", "convs.1"}  # the compress technique prunes every conv; the head never


def test_the_conv_network_is_the_conv_loops():
    """Its logits are the golden conv loop's float forward (codesign.loops.csb_conv, NumPy float64) on the same
    weights: the same convs, ReLUs and channel-major flattening into the head."""
    from codesign.loops.csb_conv import CsbConvSetup, CsbConvTrainer
    from codesign.pe.csb import CsbSpec

    net = configured_model(ModelConfig(name="convnet", channels=(4, 6), strides=(1, 2)), sample_shape=(2, 5, 5),
                           classes=3)
    assert isinstance(net, ConvNet)
    assert [tuple(conv.weight.shape) for conv in net.convs] == [(4, 2, 3, 3), (6, 4, 3, 3)]
    assert [conv.stride for conv in net.convs] == [(1, 1), (2, 2)] and all(conv.bias is None for conv in net.convs)
    assert tuple(net.head.weight.shape) == (3, 6 * 3 * 3) and net.head.bias is None
    setup = CsbConvSetup(spec=CsbSpec(block_rows=4, block_cols=4, kernel=3, batch=4, max_stride=2), image=(2, 5, 5),
                         convs=((4, 1), (6, 2)), classes=3, batch_size=8, epochs=2, warmup_epochs=1, lr=0.1,
                         schedule="constant", seed=0)
    weights = [conv.weight.detach().double().numpy() for conv in net.convs]
    weights.append(net.head.weight.detach().double().numpy().reshape(3, -1, 1, 1))
    x = torch.randn(7, 2, 5, 5)
    golden = CsbConvTrainer(setup)._float_forward(x.double().numpy(), weights)[1][-1].reshape(7, -1)
    with torch.no_grad():
        np.testing.assert_allclose(net(x).double().numpy(), golden, rtol=1e-5, atol=1e-5)
    assert [name for name, module in net.named_modules() if hasattr(module, "layer_name")] == [
        "convs.0", "convs.1", "head"]


def test_the_conv_network_s_residual_blocks_are_the_conv_loops():
    """With blocks (an identity, then a stride-2 projection; no batch norm), its logits are still the golden conv
    loop's float forward on the same weights, layer for layer in the loop's order (conv1, conv2, projection)."""
    from codesign.loops.csb_conv import CsbConvSetup, CsbConvTrainer
    from codesign.pe.csb import CsbSpec

    model = ModelConfig(name="convnet", channels=(4,), strides=(1,), block_channels=(4, 6), block_strides=(1, 2))
    net = configured_model(model, sample_shape=(2, 5, 5), classes=3)
    assert [type(module).__name__ for block in net.residual for module in (block.bn1, block.bn2)] == ["Identity"] * 4
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in net.modules()) and len(net.blocks) == 0
    setup = CsbConvSetup(spec=CsbSpec(block_rows=4, block_cols=4, kernel=3, batch=4, max_stride=2), image=(2, 5, 5),
                         convs=((4, 1),), blocks=model.blocks, classes=3, batch_size=8, epochs=2, warmup_epochs=1,
                         lr=0.1, schedule="constant", seed=0)
    second = net.residual[1]
    convs = [net.convs[0], net.residual[0].conv1, net.residual[0].conv2, second.conv1, second.conv2,
             second.shortcut[0]]
    weights = [conv.weight.detach().double().numpy() for conv in convs]
    weights.append(net.head.weight.detach().double().numpy().reshape(3, -1, 1, 1))
    assert [w.shape for w in weights] == [tuple(o for o in (out, c, k, k)) for c, out, k, *_ in setup.layer_maps]
    x = torch.randn(7, 2, 5, 5)
    golden = CsbConvTrainer(setup)._float_forward(x.double().numpy(), weights)[1][-1].reshape(7, -1)
    with torch.no_grad():
        np.testing.assert_allclose(net(x).double().numpy(), golden, rtol=1e-5, atol=1e-5)


def test_a_model_of_images_refuses_rows_of_features():
    with pytest.raises(ValueError, match="model.name = 'convnet' takes images"):
        build_model("convnet", sample_shape=(64,))
    with pytest.raises(ValueError, match="one stride per conv"):
        ConvNet(channels=(4, 4), strides=(1,))


def test_the_torch_trainer_trains_it_compressed():
    from codesign.train.trainer import Trainer

    config = config_from_dict({"data": {"name": "synthetic", "synthetic_samples": 120},
                               "model": {"name": "convnet", "channels": [4, 8], "strides": [1, 2]},
                               "optim": {"epochs": 2, "batch_size": 32, "momentum": 0.0, "weight_decay": 0.0},
                               "techniques": {"compress": {"warmup_epochs": 1}}})
    assert isinstance(config, TrainConfig)
    trainer = Trainer(config, progress=False)
    result = trainer.fit()
    compress = next(t for t in trainer.techniques if t.name == "compress")
    assert compress.phase == "fixed" and set(compress.masks) == EXPECTED_MASKS
    assert result.steps == 2 * 3 and 0 <= result.test_accuracy <= 100 and len(result.history) == 2
