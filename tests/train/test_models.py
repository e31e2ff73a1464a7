"""The models a configuration names: the plain conv network is the CSB conv loop's (3 x 3 'same' convs without
bias, a ReLU after each, a head without bias over the last map flattened channel-major), and trains under the
compress technique; a model of images refuses rows of features."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from codesign.train.config import ModelConfig, TrainConfig, config_from_dict
from codesign.train.models import ConvNet, build_model, configured_model


def test_the_conv_network_is_the_conv_loops():
    net = configured_model(ModelConfig(name="convnet", channels=(4, 6), strides=(1, 2)), sample_shape=(2, 5, 5),
                           classes=3)
    assert isinstance(net, ConvNet)
    assert [tuple(conv.weight.shape) for conv in net.convs] == [(4, 2, 3, 3), (6, 4, 3, 3)]
    assert [conv.stride for conv in net.convs] == [(1, 1), (2, 2)] and all(conv.bias is None for conv in net.convs)
    assert tuple(net.head.weight.shape) == (3, 6 * 3 * 3) and net.head.bias is None
    x = torch.randn(7, 2, 5, 5)
    with torch.no_grad():
        hidden = torch.relu(net.convs[1](torch.relu(net.convs[0](x))))
        expected = hidden.numpy().reshape(7, -1) @ net.head.weight.numpy().T  # channel-major features
        np.testing.assert_allclose(net(x).numpy(), expected, rtol=1e-5, atol=1e-6)
    assert [name for name, _ in net.named_modules() if hasattr(_, "layer_name")] == ["convs.0", "convs.1", "head"]


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
    assert compress.phase == "fixed" and set(compress.masks) >= {"convs.1"}
    assert result.steps == 2 * 3 and 0 <= result.test_accuracy <= 100 and len(result.history) == 2
