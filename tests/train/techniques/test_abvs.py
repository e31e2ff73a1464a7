"""ABVS: Eq. (1) check interval, the Fig. 3 FB rule on hand-made accuracy traces, the least-sufficient-FB
choice, FB-float training state, config validation and bit-identical resume."""

from __future__ import annotations

import math

import pytest
import torch

from codesign.numerics import FloatFormat
from codesign.train.quantize import quantize
from codesign.train.config import ConfigError, DataConfig, ModelConfig, OptimConfig, TrainConfig, config_from_dict
from codesign.train.layers import counted_layers
from codesign.train.precision import FloatQuantizer
from codesign.train.techniques.abvs import (Config, FbController, check_epoch, check_interval, fb_schedule,
                                            least_sufficient_fb)
from codesign.train.trainer import Trainer



@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """The MLP's tensors are tiny: intra-op threads only add synchronisation (and stall on a busy machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# ---------------------------------------------------------------------------- Eq. (1)


def test_check_interval_values():
    assert check_interval(50, 2.0, 6, 9) == pytest.approx(50 / 6)
    assert check_interval(50, 1.0, 6, 23) == pytest.approx(50 / 17)
    assert check_interval(50, 50 / 12, 6, 9) == pytest.approx(4.0)
    assert math.isinf(check_interval(50, 1.0, 9, 9))


def test_check_epochs_follow_the_real_interval():
    f = check_interval(50, 2.0, 6, 9)  # 8.33 epochs: checks at ceil(k * 8.33)
    assert [check_epoch(k, f) for k in range(7)] == [0, 9, 17, 25, 34, 42, 50]
    f = check_interval(50, 1.0, 6, 23)  # 2.94 epochs: every third epoch up to 48
    assert [check_epoch(k, f) for k in range(18)] == list(range(0, 49, 3)) + [50]


# ---------------------------------------------------------------------------- the FB rule


def _fig5b_trace() -> list[float]:
    """Accuracies that stall at the checks of epochs 12, 20 and 32 only (checks every 4 epochs)."""
    acc = [0.50 + 0.02 * e for e in range(9)]  # 0..8: rising, 0.66 at epoch 8
    acc += [0.66] * 4  # 9..12: flat -> gain 0 at the check of epoch 12
    acc += [0.67, 0.68, 0.69, 0.70]  # 13..16: gain 0.04 at 16
    acc += [0.70, 0.701, 0.701, 0.702]  # 17..20: gain 0.002 at 20
    acc += [0.72, 0.73, 0.74, 0.75, 0.76, 0.77, 0.78, 0.80]  # 21..28: gains 0.048 (24), 0.05 (28)
    acc += [0.80, 0.801, 0.802, 0.803]  # 29..32: gain 0.003 at 32
    acc += [0.803] * 17  # 33..49: no gain, but FB is already at fb_max
    assert len(acc) == 50
    return acc


def test_fb_rule_reproduces_fig5b_epoch_counts():
    # T = 50, FB 6 -> 9, f = 4 epochs: the paper gives 13, 8, 12, 17 epochs at FB 6, 7, 8, 9 for Fig. 5b.
    used = fb_schedule(_fig5b_trace(), fb_min=6, fb_max=9, alpha=50 / 12, epsilon=0.005)
    assert used == [6] * 13 + [7] * 8 + [8] * 12 + [9] * 17


def test_fb_rises_at_every_check_on_a_flat_trace_until_fb_max():
    # alpha = 1, FB 6 -> 23, T = 50: checks at 0, 3, ..., 48; only the first (gain 0.9 over A_check = 0) passes.
    used = fb_schedule([0.9] * 50, fb_min=6, fb_max=23, alpha=1.0, epsilon=0.005)
    assert used == [6] + [6 + (epoch - 1) // 3 for epoch in range(1, 50)]
    assert used[-1] == 22


def test_fb_is_clamped_at_fb_max():
    used = fb_schedule([0.9] * 20, fb_min=6, fb_max=7, alpha=20.0, epsilon=0.005)  # f = 1: check every epoch
    assert used == [6, 6] + [7] * 18


def test_gain_equal_to_epsilon_keeps_the_fb():
    # f = 2 epochs (T = 4, alpha = 1, FB 1 -> 3): checks at 0 and 2; A_check becomes 0.5 at epoch 0.
    assert fb_schedule([0.5, 0.5, 0.75, 0.75], fb_min=1, fb_max=3, alpha=1.0, epsilon=0.25) == [1, 1, 1, 1]
    assert fb_schedule([0.5, 0.5, 0.74, 0.74], fb_min=1, fb_max=3, alpha=1.0, epsilon=0.25) == [1, 1, 1, 2]


def test_a_check_follows_every_check_not_only_rises():
    # checks every epoch (T = 4, alpha = 2, FB 1 -> 3): gains 0.5, 0.1, 0.1 never fall below epsilon = 0.05
    assert fb_schedule([0.5, 0.6, 0.7, 0.8], fb_min=1, fb_max=3, alpha=2.0, epsilon=0.05) == [1, 1, 1, 1]
    # the same accuracies compared with the *first* A_check would all pass too; a drop triggers the rise
    assert fb_schedule([0.5, 0.6, 0.55, 0.8], fb_min=1, fb_max=3, alpha=2.0, epsilon=0.05) == [1, 1, 1, 2]


def test_fixed_fb_has_no_checks():
    controller = FbController(fb_min=5, fb_max=5, alpha=1.0, epsilon=0.005, total_epochs=3)
    for epoch in range(3):
        assert controller.end_epoch(epoch, 0.1) == 5
    assert not any(row["check"] for row in controller.log)


# ---------------------------------------------------------------------------- least sufficient FB


def test_least_sufficient_fb_is_the_smallest_within_tolerance():
    accuracy = {4: 95.0, 5: 96.5, 6: 96.3, 7: 97.0}
    assert least_sufficient_fb(accuracy, 96.8, tolerance=0.5) == 5
    assert least_sufficient_fb(accuracy, 96.8, tolerance=0.1) == 7
    assert least_sufficient_fb(accuracy, 98.0, tolerance=0.5) is None


def test_least_sufficient_fb_compares_seed_means():
    accuracy = {3: [90.0, 99.0], 4: [96.0, 96.4]}  # means 94.5 and 96.2; FB 3's best seed alone would pass
    assert least_sufficient_fb(accuracy, [96.0, 97.0], tolerance=0.5) == 4  # FP32 mean 96.5 -> at least 96.0
    with pytest.raises(ValueError):
        least_sufficient_fb(accuracy, 96.0, tolerance=-1)


# ---------------------------------------------------------------------------- config validation


@pytest.mark.parametrize("kwargs, field", [
    ({"fb_min": 0}, "fb_min"), ({"fb_min": 24, "fb_max": 24}, "fb_min"), ({"fb_max": 24}, "fb_max"),
    ({"fb_min": 9, "fb_max": 6}, "fb_min"), ({"fb_min": 6.0}, "fb_min"), ({"alpha": 0}, "alpha"),
    ({"alpha": -1.0}, "alpha"), ({"alpha": float("inf")}, "alpha"), ({"epsilon": -0.001}, "epsilon"),
    ({"rounding": "stochastic"}, "rounding"), ({"area_metric": "gates"}, "area_metric"),
    ({"family": "virtex9"}, "family"), ({"timing_fb": 5}, "timing_fb"), ({"alpha_power": 3.0}, "alpha_power"),
    ({"threshold_v": 0.7}, "min_supply_v"),
])
def test_bad_config_names_the_field(kwargs, field):
    with pytest.raises(ConfigError, match=rf"^techniques\.abvs\.{field}:"):
        TrainConfig(techniques={"abvs": Config(**kwargs)})


def test_bad_toml_values_are_refused_before_training():
    with pytest.raises(ConfigError, match=r"techniques\.abvs\.epsilon"):
        config_from_dict({"techniques": {"abvs": {"fb_min": 4, "fb_max": 8, "epsilon": -0.5}}})


# ---------------------------------------------------------------------------- training in FB-float


def _config(fb_min: int, fb_max: int, *, epochs: int = 2, validation_fraction: float = 0.2, **kwargs) -> TrainConfig:
    return TrainConfig(data=DataConfig(name="synthetic", synthetic_samples=100,
                                       validation_fraction=validation_fraction), model=ModelConfig(name="mlp"),
                       optim=OptimConfig(epochs=epochs, batch_size=32),
                       techniques={"abvs": Config(fb_min=fb_min, fb_max=fb_max, **kwargs)})


# epsilon = 1 makes every check fail; T = 3, FB 2 -> 4, alpha = 1.5 gives f = 1: a check (and a rise) every epoch.
RISING = _config(2, 4, epochs=3, alpha=1.5, epsilon=1.0)


@pytest.fixture(scope="module")
def rising_run():
    trainer = Trainer(RISING, progress=False)
    return trainer, trainer.fit()


def test_layers_weights_and_momentum_live_in_fb_float_and_macs_are_priced_per_fb():
    trainer = Trainer(_config(4, 4), progress=False)
    result = trainer.fit()
    fmt = FloatFormat(exp_bits=8, frac_bits=4)
    for layer in counted_layers(trainer.model):
        for quantizer in (layer.precision.activation, layer.precision.weight, layer.precision.grad):
            assert quantizer == FloatQuantizer(fmt)
    stored = list(trainer.model.parameters()) + [s["momentum_buffer"] for s in trainer.optimizer.state.values()]
    for tensor in stored:
        assert torch.equal(quantize(tensor.detach(), fmt), tensor.detach())
    records = trainer.ledger.records()
    assert records and all(r.arith == "fp" and r.bits_a == 4 for r in records)
    model = trainer.techniques[0].fp_mac_pj()
    macs = sum(r.macs for r in records)
    assert result.cost["total"]["compute_pj"] == pytest.approx(macs * model(4), rel=1e-12)
    assert result.techniques["abvs"]["fb_trace"] == [4, 4]
    assert result.techniques["abvs"]["energy_model"]["source"].startswith("fallback table")


def test_rising_fb_changes_the_layers_precision_and_the_priced_fb(rising_run):
    trainer, result = rising_run
    report = result.techniques["abvs"]
    assert report["fb_trace"] == [2, 3, 4]
    assert report["epochs_per_fb"] == {"2": 1, "3": 1, "4": 1}
    assert [check["epoch"] for check in report["checks"]] == [0, 1, 2]
    assert all(layer.precision.activation.fmt.frac_bits == 4 for layer in counted_layers(trainer.model))
    per_fb = {fb: sum(r.macs for r in trainer.ledger.records() if r.bits_a == fb) for fb in (2, 3, 4)}
    assert per_fb[2] == per_fb[3] == per_fb[4] > 0  # every epoch does the same MACs: the ledger is Eq. (2)
    model = trainer.techniques[0].fp_mac_pj()
    assert result.cost["total"]["compute_pj"] == pytest.approx(sum(n * model(fb) for fb, n in per_fb.items()),
                                                               rel=1e-12)


def test_the_fb_rule_reads_validation_accuracy_never_the_test_set(rising_run):
    _, result = rising_run
    report = result.techniques["abvs"]
    validation = [row["validation_accuracy"] / 100 for row in result.history]
    assert report["accuracy_trace"] == pytest.approx(validation, abs=0)
    with pytest.raises(ConfigError, match="validation_fraction"):
        Trainer(_config(2, 4, validation_fraction=0.0), progress=False)
    Trainer(_config(4, 4, validation_fraction=0.0), progress=False)  # a fixed FB makes no choice: no split needed


def test_resume_is_bit_identical(tmp_path, rising_run):
    straight_trainer, straight = rising_run
    assert Trainer(RISING, progress=False).fit(checkpoint=tmp_path / "ckpt.pt", stop_after_steps=3) is None
    resumed_trainer = Trainer(RISING, progress=False)  # a fresh process would start like this
    resumed = resumed_trainer.fit(checkpoint=tmp_path / "ckpt.pt", resume=True)
    assert resumed.resumed_from_step == 3  # 2 steps per epoch: stopped inside epoch 1, after the first rise
    for a, b in zip(straight_trainer.model.state_dict().values(), resumed_trainer.model.state_dict().values()):
        assert torch.equal(a, b)
    assert resumed.techniques["abvs"] == straight.techniques["abvs"]
    assert resumed_trainer.ledger.records() == straight_trainer.ledger.records()  # MAC counts: exact
    for a, b in zip(resumed.history, straight.history):
        assert a["test_accuracy"] == b["test_accuracy"] and a["train_loss"] == b["train_loss"]
        # the ledger sums its records in insertion order, which a reloaded ledger does not keep: last-ulp only
        assert a["energy_pj"] == pytest.approx(b["energy_pj"], rel=1e-12)
