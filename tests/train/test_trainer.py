"""The loop is deterministic, resumes bit-identically, and counts the MACs it really computes."""

import numpy as np
import pytest
import torch

from codesign.train.config import DataConfig, ModelConfig, OptimConfig, TrainConfig
from codesign.train.data import load_digits_dataset, stratified_split
from codesign.train.layers import CountedLinear
from codesign.train.precision import FixedQuantizer, LayerPrecision
from codesign.train.trainer import Trainer

SMALL = TrainConfig(seed=5, data=DataConfig(name="synthetic", synthetic_samples=200),
                    optim=OptimConfig(epochs=2, batch_size=32))


def weights(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in trainer.model.state_dict().items()}


def test_same_seed_same_bits_other_seed_other_bits():
    a, b = Trainer(SMALL, progress=False), Trainer(SMALL, progress=False)
    ra, rb = a.fit(), b.fit()
    assert all(torch.equal(x, y) for x, y in zip(weights(a).values(), weights(b).values()))
    assert ra.cost == rb.cost and ra.history == rb.history
    c = Trainer(SMALL.replace(seed=6), progress=False)
    c.fit()
    assert not all(torch.equal(x, y) for x, y in zip(weights(a).values(), weights(c).values()))


@pytest.mark.parametrize("stop_after", [1, 5, 10])  # mid-epoch, and exactly at the epoch boundary (5 batches/epoch)
def test_killed_and_resumed_run_ends_bit_identical(tmp_path, stop_after, kill_and_resume):
    run = kill_and_resume(SMALL, stop_after, tmp_path / "run.pt")
    assert run.result.cost == run.expected.cost and run.result.history == run.expected.history


def test_resume_refuses_a_checkpoint_of_another_config(tmp_path):
    checkpoint = tmp_path / "run.pt"
    Trainer(SMALL, progress=False).fit(checkpoint=checkpoint, stop_after_steps=2)
    with pytest.raises(ValueError, match="different configuration"):
        Trainer(SMALL.replace(seed=9), progress=False).fit(checkpoint=checkpoint, resume=True)


def test_ledger_counts_the_three_phases_exactly():
    config = TrainConfig(seed=0, data=DataConfig(name="synthetic", synthetic_samples=40, test_fraction=0.5),
                         model=ModelConfig(name="mlp", hidden=(16,)), optim=OptimConfig(epochs=1, batch_size=20))
    result = Trainer(config, progress=False).fit()
    samples = 20  # one batch of 20
    forward = samples * (64 * 16 + 16 * 10)
    phases = result.cost["by_phase"]
    assert phases["forward"]["macs"] == forward
    assert phases["weight_grad"]["macs"] == forward
    assert phases["error"]["macs"] == samples * 16 * 10  # no error pass into the network input
    assert phases["forward"]["bitops"] == forward * 32 * 32


def test_fixed_point_layers_accumulate_exactly():
    torch.manual_seed(0)
    layer = CountedLinear(300, 4)
    layer.precision = LayerPrecision(activation=FixedQuantizer(8), weight=FixedQuantizer(8), grad=FixedQuantizer(16))
    x = torch.randn(5, 300)
    y = layer(x)
    xq, wq = layer.precision.activation(x).double(), layer.precision.weight(layer.weight).double()
    exact = xq @ wq.t() + layer.bias.double()
    assert torch.equal(y, exact.float())


def test_digits_split_is_fixed_and_stratified():
    data = load_digits_dataset()
    assert data.train_x.shape[1:] == (1, 8, 8) and data.train_size + data.test_y.numel() == 1797
    assert float(data.train_x.max()) == 1.0 and float(data.train_x.min()) == 0.0
    counts = np.bincount(data.test_y.numpy(), minlength=10)
    assert counts.min() >= 43 and counts.max() <= 46
    train, test = stratified_split(np.repeat(np.arange(3), 8), 0.25, 0)
    assert len(test) == 6 and not set(train) & set(test)
    assert torch.equal(load_digits_dataset().test_y, data.test_y)
