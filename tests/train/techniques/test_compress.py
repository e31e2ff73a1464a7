"""Compressed training: kernel-wise pruning, frozen power-of-two scales, an 8-bit view of a wide weight buffer."""

from fractions import Fraction

import pytest
import torch

from codesign.energy import CostLedger
from codesign.train.config import ConfigError, DataConfig, ModelConfig, OptimConfig, TrainConfig
from codesign.train.layers import CountedConv2d, CountedLinear
from codesign.train.precision import FixedQuantizer, LayerPrecision
from codesign.train.techniques.compress import (
    Config,
    MsbWeightQuantizer,
    kernel_mask,
    unpruned_macs_per_output,
)
from codesign.train.trainer import Trainer

# 150 training samples, batches of 30: 5 steps per epoch; ResNet-8 of width 4 keeps every run well under a second
SMALL = TrainConfig(seed=3, data=DataConfig(name="synthetic", synthetic_samples=200),
                    model=ModelConfig(depth=8, width=4), optim=OptimConfig(epochs=3, batch_size=30))


def compressed(**changes) -> TrainConfig:
    settings = {"warmup_epochs": 1, "drop_budget": 100.0, "validation_fraction": 0.2} | changes
    return SMALL.replace(techniques={"compress": Config(**settings)})


# -- kernel-wise pruning masks ------------------------------------------------------------------

def hand_made_weight() -> torch.Tensor:
    """2 x 5 kernels of 1 x 2; the L2 norm of kernel (n, c) is NORMS[n][c]."""
    kernels = [[(3.0, 4.0), (0.0, -3.0), (9.0, 0.0), (-3.0, 0.0), (0.0, 7.0)],  # norms 5, 3, 9, 3, 7
               [(1.0, 0.0), (0.0, 8.0), (0.0, 3.0), (6.0, 0.0), (0.0, -4.0)]]  # norms 1, 8, 3, 6, 4
    return torch.tensor(kernels).reshape(2, 5, 1, 2)


def pruned(keep: torch.Tensor) -> set[tuple[int, int]]:
    return {(int(n), int(c)) for n, c in (~keep).nonzero()}


def test_kernel_masks_prune_the_smallest_l2_norms_with_ties_in_index_order():
    weight = hand_made_weight()
    # sorted by norm: 1 (1,0); 3 (0,1) (0,3) (1,2) tie, in flat-index order; 4 (1,4); 5 (0,0); 6 (1,3); ...
    assert pruned(kernel_mask(weight, 0)) == set()
    assert pruned(kernel_mask(weight, 10)) == {(1, 0)}
    assert pruned(kernel_mask(weight, 20)) == {(1, 0), (0, 1)}
    assert pruned(kernel_mask(weight, 30)) == {(1, 0), (0, 1), (0, 3)}
    assert pruned(kernel_mask(weight, 40)) == {(1, 0), (0, 1), (0, 3), (1, 2)}
    assert pruned(kernel_mask(weight, 50)) == {(1, 0), (0, 1), (0, 3), (1, 2), (1, 4)}
    # L2, not L1: kernel (0,0) = (3, 4) has L1 7 > 6 = L1 of (1,3) = (6, 0), but L2 5 < 6, so it goes first
    assert pruned(kernel_mask(weight, 60)) - pruned(kernel_mask(weight, 50)) == {(0, 0)}
    assert pruned(kernel_mask(weight, 15)) == {(1, 0)}  # 10 kernels x 15 % = 1.5: rounded down
    assert pruned(kernel_mask(weight, 100)) == {(n, c) for n in range(2) for c in range(5)}


def test_search_prunes_layer_by_layer_within_the_cumulative_budget():
    trainer = Trainer(compressed(drop_budget=2.0), progress=False)
    technique = trainer.techniques[0]
    technique.validation_index = torch.arange(100)  # 100 samples: one wrong answer is one point
    first, second, third = technique.prunable[:3]
    # scripted accuracy: 100 correct unpruned; pruning 50 % or more of any of these three layers costs one answer,
    # and any layer beyond 70 % costs three (more than the whole budget of two)
    def scripted() -> int:
        wrong = 0
        for name, keep in technique.masks.items():
            share = 1 - float(keep.float().mean())
            wrong += (name in (first, second, third) and share >= 0.5) + 3 * (share > 0.7)
        return 100 - wrong
    technique._validation_correct = scripted
    technique._prune()
    visited = [row["layer"] for row in technique.search_log]
    assert visited == sorted(visited, key=technique.prunable.index)  # one layer at a time, in search order
    steps = {name: [row["percent"] for row in technique.search_log if row["layer"] == name] for name in technique.prunable}
    assert steps[first] == steps[second] == [10, 20, 30, 40, 50, 60, 70, 80]  # 80 % fails: beyond 70 %
    assert steps[third] == [10, 20, 30, 40, 50]  # 50 % would be the third lost point: the budget is spent
    layer_kernels = {name: technique.layers[name].weight.shape[0] * technique.layers[name].weight.shape[1]
                     for name in technique.prunable}
    for name, percent in ((first, 70), (second, 70), (third, 40)):
        assert int((~technique.masks[name]).sum()) == layer_kernels[name] * percent // 100
        weight = technique.layers[name].weight.detach()
        assert torch.all(weight[~technique.masks[name]] == 0)
        assert torch.all(weight.flatten(2).norm(dim=2)[technique.masks[name]] > 0)


# -- training with masks, frozen scales and the wide buffer ---------------------------------------

@pytest.fixture(scope="module")
def trained() -> Trainer:
    trainer = Trainer(compressed(max_percent=50), progress=False)
    trainer.fit()
    return trainer


def test_pruned_weights_stay_exactly_zero_through_training(trained):
    technique = trained.techniques[0]
    assert technique.phase == "fixed" and trained.global_step == 15
    pruned_kernels = 0
    for name, keep in technique.masks.items():
        weight = technique.layers[name].weight
        assert torch.equal(weight.detach()[~keep], torch.zeros_like(weight.detach()[~keep]))
        assert torch.all(torch.signbit(weight.detach()[~keep]) == 0)  # +0.0, not -0.0
        assert torch.all(trained.optimizer.state[weight]["momentum_buffer"][~keep] == 0)
        assert torch.all(weight.grad[~keep] == 0)
        pruned_kernels += int((~keep).sum())
    assert pruned_kernels > 0  # with an unlimited budget every layer reaches max_percent


def test_frozen_scales_are_the_power_of_two_fit_of_the_measured_max(trained):
    technique = trained.techniques[0]
    # the stem's input is the images; the last warm-up epoch visits every training image once
    assert technique.max_abs["stem"]["activation"] == float(trained.dataset.train_x.abs().max())
    for name, blobs in technique.max_abs.items():
        assert set(blobs) == {"activation", "weight", "error", "gradient"}
        for blob, max_abs in blobs.items():
            frac = technique.frac_bits[name][blob]
            # fit: the max, in units of the 8-bit quantum 2**-frac, lies in the code's top binade [64, 128)
            assert 64 <= max_abs * 2.0**frac < 128, (name, blob, max_abs, frac)
        precision = technique.layers[name].precision
        assert precision.activation == FixedQuantizer(8, technique.frac_bits[name]["activation"])
        assert precision.grad == FixedQuantizer(8, technique.frac_bits[name]["error"])
        assert precision.weight == MsbWeightQuantizer(8, technique.frac_bits[name]["weight"], buffer_bits=24)
        # the weights sit on the 24-bit buffer's grid: frac + 16 fraction bits
        codes = technique.layers[name].weight.detach().double() * 2.0 ** (technique.frac_bits[name]["weight"] + 16)
        assert torch.equal(codes, codes.round())


def test_kernels_and_mac_counts_are_reported_and_drop_with_the_pruned_fraction(trained):
    technique = trained.techniques[0]
    summary = technique.pruning_summary()
    total = sum(row["kernels"] for row in summary["per_layer"].values())
    pruned = sum(row["pruned"] for row in summary["per_layer"].values())
    assert summary["fraction_of_all_conv_kernels"] == pruned / total
    for name, row in summary["per_layer"].items():
        keep = technique.masks[name]
        assert row["pruned"] == int((~keep).sum()) and row["fraction"] == row["pruned"] / keep.numel()
        assert 0.4 <= row["fraction"] <= 0.5  # max_percent=50 of 4..64 kernels, rounded down
        layer = technique.layers[name]
        assert layer.macs_per_output() == Fraction(int(keep.sum()) * layer.kernel_size[0] * layer.kernel_size[1],
                                                   layer.out_channels)


def test_a_pruned_conv_counts_only_unpruned_kernels_in_all_three_phases():
    torch.manual_seed(0)
    layer = CountedConv2d(3, 4, 3, padding=1, bias=False)
    layer.layer_name = "conv"
    keep = torch.ones(4, 3, dtype=torch.bool)
    keep[0, 0] = keep[1, 2] = keep[2, 1] = keep[3, 0] = keep[3, 2] = False  # 5 of 12 kernels pruned
    layer.macs_per_output = unpruned_macs_per_output(layer, keep)
    layer.ledger = CostLedger()
    x = torch.randn(2, 3, 5, 5, requires_grad=True)
    layer(x).sum().backward()
    expected = 2 * 5 * 5 * 7 * 9  # batch x output pixels x unpruned kernels x 3x3
    for phase in ("forward", "error", "weight_grad"):
        assert layer.ledger.total_macs(phase) == expected  # dense would be 2 * 25 * 12 * 9 = 5400


def test_only_the_eight_msbs_of_the_wide_buffer_reach_forward_and_error_passes():
    quantizer = MsbWeightQuantizer(8, 4, buffer_bits=24)  # 8-bit quantum 1/16; buffer quantum 2**-20
    lsb = 2.0**-20
    buffer = torch.tensor([[12 * 2**16 * lsb + 65535 * lsb,  # 0.75 + almost one 8-bit step: MSBs say 0.75
                            -(3 * 2**16 + 1) * lsb,  # just below -0.1875: MSBs (floor) say -0.25
                            5 * 2**16 * lsb]])  # exactly 0.3125
    layer = CountedLinear(3, 1, bias=False)
    layer.precision = LayerPrecision(activation=FixedQuantizer(8, 4), weight=quantizer, grad=FixedQuantizer(8, 4))
    with torch.no_grad():
        layer.weight.copy_(buffer)
    x = torch.tensor([[1.0, 2.0, 4.0]], requires_grad=True)
    y = layer(x)
    assert y.item() == 0.75 * 1 - 0.25 * 2 + 0.3125 * 4
    y.backward(torch.tensor([[1.0]]))
    assert x.grad.tolist() == [[0.75, -0.25, 0.3125]]  # the error pass sees the same 8-bit weights
    assert quantizer.buffer_format.bits == 24 and quantizer.buffer_format.frac_bits == 20


def test_small_updates_accumulate_in_a_24_bit_buffer_and_vanish_in_a_16_bit_one():
    update = 2.0**-17  # 1/1024 of the 8-bit step 2**-7; below half the 16-bit buffer's step 2**-15
    views = {}
    for buffer_bits in (24, 16):
        quantizer = MsbWeightQuantizer(8, 7, buffer_bits=buffer_bits)
        weight = torch.tensor([0.5])
        for _ in range(1024):
            weight = quantizer.store(weight + update)
        views[buffer_bits] = (weight.item(), quantizer(weight).item())
    assert views[24] == (0.5 + 2.0**-7, 0.5 + 2.0**-7)  # 1024 updates made one 8-bit step
    assert views[16] == (0.5, 0.5)  # every single update rounded away


def test_a_16_bit_buffer_rounds_away_more_updates_in_training(trained):
    narrow = Trainer(compressed(max_percent=50, buffer_bits=16), progress=False)
    narrow.fit()
    wide, short = trained.techniques[0].buffer_update_summary(), narrow.techniques[0].buffer_update_summary()
    assert wide["proposed"] > 0 and short["proposed"] > 0
    assert short["lost_fraction"] > wide["lost_fraction"]


def test_a_32_bit_buffer_keeps_float64_weights_that_hold_its_codes():
    trainer = Trainer(compressed(buffer_bits=32, max_percent=0), progress=False)
    trainer.fit()
    technique = trainer.techniques[0]
    for name, layer in technique.layers.items():
        assert layer.weight.dtype == torch.float64
        codes = layer.weight.detach() * 2.0 ** (technique.frac_bits[name]["weight"] + 24)
        assert torch.equal(codes, codes.round())


# -- configuration and checkpoints -----------------------------------------------------------------

@pytest.mark.parametrize(("changes", "field"), [
    ({"buffer_bits": 20}, "buffer_bits"), ({"buffer_bits": 8}, "buffer_bits"), ({"drop_budget": -0.5}, "drop_budget"),
    ({"warmup_epochs": 0}, "warmup_epochs"), ({"step_percent": 0}, "step_percent"), ({"order": "random"}, "order"),
    ({"validation_fraction": 1.0}, "validation_fraction"), ({"bits": 1}, "bits"),
])
def test_bad_config_values_name_their_field(changes, field):
    with pytest.raises(ConfigError, match=rf"^techniques\.compress\.{field}:"):
        SMALL.replace(techniques={"compress": Config(**changes)})


def test_warmup_must_leave_fixed_point_epochs_before_training_starts():
    with pytest.raises(ConfigError, match=r"^techniques\.compress\.warmup_epochs:.*optim\.epochs"):
        Trainer(compressed(warmup_epochs=3), progress=False)


@pytest.mark.parametrize("stop_after", [3, 5, 8])  # measuring epoch, right before the search, fixed point
def test_killed_and_resumed_run_ends_bit_identical(tmp_path, stop_after, kill_and_resume):
    run = kill_and_resume(compressed(drop_budget=5.0), stop_after, tmp_path / "run.pt")
    # the pJ totals are float sums in the ledger's dict order, which a reload changes (sorted vs first use)
    assert run.result.cost["total"] == pytest.approx(run.expected.cost["total"], rel=1e-12)
    assert run.result.history == run.expected.history and run.result.techniques == run.expected.techniques
