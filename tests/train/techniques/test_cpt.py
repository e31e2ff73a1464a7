"""CPT: the cyclic schedule, the precision range test, BitOPs, config validation and resume."""

from collections import Counter

import numpy as np
import pytest
import torch

from codesign.train.config import ConfigError, DataConfig, ModelConfig, OptimConfig, TrainConfig, config_from_dict
from codesign.train.data import Dataset
from codesign.train.layers import counted_layers
from codesign.train.techniques.cpt import Config, cyclic_bits, select_min_bits
from codesign.train.trainer import Trainer

# synthetic: 10 samples per class, round(0.2 * 10) = 2 per class held out -> 80 training samples
TINY_DATA = DataConfig(name="synthetic", synthetic_samples=100, test_fraction=0.2)


# -- the schedule ------------------------------------------------------------------------------------------------

def test_schedule_by_hand_two_cycles_of_four_steps():
    # B_min=3, B_max=8, N=2 over 8 steps: T_n = 4, phases 0, 1/4, 1/2, 3/4, then wrap.
    # 3 + 2.5 * (1 - cos(phase * pi)): 3.000 -> 3, 3.732 -> 4, 5.500 -> 6, 7.268 -> 8 (ceil)
    assert [cyclic_bits(t, 8, 2, 3, 8) for t in range(8)] == [3, 4, 6, 8, 3, 4, 6, 8]
    # the authors' np.rint instead: 3, 4, 6 (5.5 ties to even), 7
    assert [cyclic_bits(t, 8, 2, 3, 8, rounding="rint") for t in range(8)] == [3, 4, 6, 7, 3, 4, 6, 7]


def test_schedule_by_hand_when_cycles_do_not_divide_the_steps():
    # B_min=2, B_max=4, N=3 over 10 steps: T_n = 10/3, phase = frac(3t/10) = 0, .3, .6, .9, .2, .5, .8, .1, .4, .7
    # 2 + (1 - cos(phase * pi)) = 2, 2.41, 3.31, 3.95, 2.19, 3 (exactly: no extra bit), 3.81, 2.05, 2.69, 3.59
    assert [cyclic_bits(t, 10, 3, 2, 4) for t in range(10)] == [2, 3, 4, 4, 3, 3, 4, 3, 3, 4]


def test_schedule_wraps_exactly_at_each_cycle_boundary():
    # 300 steps, N=6: T_n = 50 steps; each cycle starts at B_min and ends at B_max, and the next starts low again
    for start in range(0, 300, 50):
        assert cyclic_bits(start, 300, 6, 3, 8) == 3
        assert cyclic_bits(start + 49, 300, 6, 3, 8) == 8
        widths = [cyclic_bits(t, 300, 6, 3, 8) for t in range(start, start + 50)]
        assert widths == sorted(widths) and set(widths) == {3, 4, 5, 6, 7, 8}
    # N=7: T_n = 300/7 = 42.86 steps, so a cycle starts between two steps: the width drops exactly at the first
    # step past each boundary (t*7 // 300 increases) and never inside a cycle; with ceil, B_min itself is reached
    # only where a boundary falls on a step (t = 0), any later phase > 0 already costs B_min + 1
    widths = [cyclic_bits(t, 300, 7, 3, 8) for t in range(300)]
    drops = [t for t in range(1, 300) if widths[t] < widths[t - 1]]
    assert drops == [t for t in range(1, 300) if (t * 7) // 300 > ((t - 1) * 7) // 300]
    assert len(drops) == 6 and widths[0] == 3 and all(widths[t] == 4 for t in drops)
    # constant schedule when B_min == B_max
    assert {cyclic_bits(t, 50, 4, 8, 8) for t in range(50)} == {8}


def _forward_bits_per_step(trainer):
    """Record the weight/activation/gradient widths of every training forward of the stem layer."""
    seen = []
    first = counted_layers(trainer.model)[0]

    def hook(module, _inputs):
        if module.training:
            p = module.precision
            seen.append((p.activation.bits, p.weight.bits, p.grad.bits))

    first.register_forward_pre_hook(hook)
    return seen


def test_trainer_steps_follow_the_schedule_with_8_bit_gradients():
    # 80 samples / batch 20 = 4 steps per epoch, 2 epochs = 8 steps, N = 2: the table above
    config = TrainConfig(data=TINY_DATA, model=ModelConfig(name="mlp", hidden=(16,)),
                         optim=OptimConfig(epochs=2, batch_size=20),
                         techniques={"cpt": Config(min_bits=3, max_bits=8, grad_bits=8, cycles=2)})
    trainer = Trainer(config, progress=False)
    seen = _forward_bits_per_step(trainer)
    result = trainer.fit()
    assert seen == [(b, b, 8) for b in (3, 4, 6, 8, 3, 4, 6, 8)]
    assert result.techniques["cpt"]["steps_by_forward_bits"] == {"3": 2, "4": 2, "6": 2, "8": 2}
    # evaluation happens at B_max, whatever the last step's width was
    assert all(layer.precision.weight.bits == 8 for layer in counted_layers(trainer.model))


def test_bitops_come_from_the_ledger_at_the_scheduled_widths():
    def run(techniques):
        config = TrainConfig(data=TINY_DATA, model=ModelConfig(name="mlp", hidden=(16,)),
                             optim=OptimConfig(epochs=2, batch_size=20), techniques=techniques)
        trainer = Trainer(config, progress=False)
        return trainer, trainer.fit()

    static_trainer, static = run({"cpt": Config(min_bits=8, max_bits=8)})
    cpt_trainer, cpt = run({"cpt": Config(min_bits=3, max_bits=8, cycles=2)})
    # MLP 64-16-10: 64*16 + 16*10 = 1184 forward MACs per sample; 8 steps of 20 samples
    assert static.cost["by_phase"]["forward"]["macs"] == cpt.cost["by_phase"]["forward"]["macs"] == 8 * 20 * 1184
    assert static.cost["by_phase"]["forward"]["bitops"] == 8 * 20 * 1184 * 64
    # forward: each of 3, 4, 6, 8 bits for 2 steps -> mean b^2 = (9 + 16 + 36 + 64) / 4
    assert cpt.cost["by_phase"]["forward"]["bitops"] == 8 * 20 * 1184 * (9 + 16 + 36 + 64) / 4
    # backward: 8-bit gradients times the step's weights (error) or activations (weight gradient)
    records = cpt_trainer.ledger.records()
    assert {(r.bits_a, r.bits_b) for r in records if r.phase == "forward"} == {(3, 3), (4, 4), (6, 6), (8, 8)}
    assert {(r.bits_a, r.bits_b) for r in records if r.phase != "forward"} == {(8, 3), (8, 4), (8, 6), (8, 8)}
    # the second layer only (the first takes the network input and sends no error back): 16*10 MACs per sample
    assert cpt.cost["by_phase"]["error"]["bitops"] == 8 * 20 * 160 * 8 * (3 + 4 + 6 + 8) / 4
    assert cpt.bitops / static.bitops == pytest.approx(
        (1184 * 125 / 4 + 160 * 8 * 21 / 4 + 1184 * 8 * 21 / 4) / (1184 * 64 * 2 + 160 * 64), rel=1e-12)


# -- the precision range test ------------------------------------------------------------------------------------

def test_select_min_bits_takes_the_first_crossing():
    assert select_min_bits([2, 3, 4, 5], [1.0, 4.0, 12.0, 30.0], 10.0) == 4
    assert select_min_bits([2, 3, 4], [1.0, 10.0, 9.0], 10.0) is None  # must exceed, not equal
    assert select_min_bits([2, 3], [-5.0, 50.0], 0.0) == 3


def _invisible_below_five_bits(per_class: int = 24) -> Dataset:
    """10 classes whose pixels differ only below the 4-bit quantum of the input quantiser.

    Pixel 0 is always 4.0, so the dynamic power-of-two scale gives the input b-4 fraction bits at b bits (a
    quantum of 4, 2, 1, 0.5 at b = 2, 3, 4, 5). The other 63 pixels are +-0.45 in a fixed random sign code per
    class: they round to 0 below 5 bits and to +-0.5 from 5 bits on. Below 5 bits every image is the same input,
    so no amount of training can separate the classes; from 5 bits on a linear classifier learns them in a few steps.
    """
    rng = np.random.default_rng(5)
    codes = np.where(rng.random((10, 63)) < 0.5, 0.45, -0.45)
    labels = np.repeat(np.arange(10), per_class)
    images = np.concatenate([np.full((labels.size, 1), 4.0), codes[labels]], axis=1).reshape(-1, 1, 8, 8)
    x = torch.from_numpy(images.astype(np.float32))
    y = torch.from_numpy(labels.astype(np.int64))
    return Dataset(x, y, x[::7], y[::7], 10)


def test_range_test_picks_the_lowest_width_at_which_training_takes_off():
    dataset = _invisible_below_five_bits()
    config = TrainConfig(
        data=DataConfig(name="synthetic"), model=ModelConfig(name="mlp", hidden=()),  # one linear layer, 64 -> 10
        optim=OptimConfig(epochs=1, batch_size=8, lr=0.3, momentum=0.0, schedule="constant"),
        techniques={"cpt": Config(max_bits=8, cycles=1, range_test=True, range_test_start_bits=2, range_test_steps=4,
                                  range_test_samples=1000, range_test_threshold=20.0)})
    trainer = Trainer(config, dataset=dataset, progress=False)
    result = trainer.fit()
    report = result.techniques["cpt"]
    test = report["range_test"]
    # the held batch is the whole (balanced) training set: one prediction for all -> exactly 10 %, no change
    assert test["held_samples"] == 240
    assert test["candidates_tried"] == [2, 3, 4, 5]
    assert test["accuracy_before"][:3] == test["accuracy_after"][:3] == [10.0, 10.0, 10.0]
    assert test["differences"][:3] == [0.0, 0.0, 0.0]
    assert test["differences"][3] > 20.0
    assert report["min_bits"] == 5 and test["crossed"]
    # the sweep's 16 steps ran at 2, 3, 4, 5 bits; the schedule (B_min 5) took over at step 16 of 30
    assert test["training_steps"] == 16
    assert all(report["steps_by_forward_bits"][str(b)] >= 4 for b in (2, 3, 4))
    # its held-batch forwards are in the ledger: 64 * 10 = 640 MACs per sample, 2 passes per candidate
    held = 2 * 4 * 240 * 640
    assert test["held_forward_macs"] == held
    assert test["held_forward_bitops"] == 2 * 240 * 640 * (4 + 9 + 16 + 25)
    assert result.cost["by_phase"]["forward"]["macs"] == 30 * 8 * 640 + held


def test_range_test_falls_back_to_static_when_nothing_crosses():
    config = TrainConfig(data=TINY_DATA, model=ModelConfig(name="mlp", hidden=(16,)),
                         optim=OptimConfig(epochs=2, batch_size=20),
                         techniques={"cpt": Config(max_bits=4, cycles=2, range_test=True, range_test_start_bits=2,
                                                   range_test_steps=1, range_test_threshold=99.9)})
    result = Trainer(config, progress=False).fit()
    report = result.techniques["cpt"]
    assert report["range_test"]["candidates_tried"] == [2, 3, 4] and not report["range_test"]["crossed"]
    assert report["min_bits"] == 4 and report["steps_by_forward_bits"] == {"2": 1, "3": 1, "4": 6}


# -- validation ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fields, name", [
    ({"min_bits": 9, "max_bits": 8}, "techniques.cpt.min_bits"),
    ({"cycles": 0}, "techniques.cpt.cycles"),
    ({"max_bits": 33}, "techniques.cpt.max_bits"),
    ({"min_bits": 1}, "techniques.cpt.min_bits"),
    ({"grad_bits": 1}, "techniques.cpt.grad_bits"),
    ({"grad_bits": 40}, "techniques.cpt.grad_bits"),
    ({"range_test_start_bits": 1}, "techniques.cpt.range_test_start_bits"),
    ({"range_test_start_bits": 9}, "techniques.cpt.range_test_start_bits"),
    ({"range_test_threshold": -1.0}, "techniques.cpt.range_test_threshold"),
    ({"schedule_rounding": "floor"}, "techniques.cpt.schedule_rounding"),
    ({"rounding": "stochastic"}, "techniques.cpt.rounding"),
])
def test_bad_config_is_refused_naming_the_field(fields, name):
    with pytest.raises(ConfigError, match=name.replace(".", r"\.")):
        TrainConfig(techniques={"cpt": Config(**fields)})


def test_bad_toml_section_is_refused_naming_the_field():
    with pytest.raises(ConfigError, match=r"techniques\.cpt\.min_bits"):
        config_from_dict({"techniques": {"cpt": {"min_bits": 6, "max_bits": 4}}})
    with pytest.raises(ConfigError, match=r"techniques\.cpt\.cycles"):
        config_from_dict({"techniques": {"cpt": {"cycles": 0}}})


def test_run_shape_problems_are_refused_before_the_first_step():
    # 8 steps in all: 9 cycles would be shorter than a step
    too_many_cycles = TrainConfig(data=TINY_DATA, optim=OptimConfig(epochs=2, batch_size=20),
                                  model=ModelConfig(name="mlp"), techniques={"cpt": Config(cycles=9)})
    with pytest.raises(ConfigError, match=r"techniques\.cpt\.cycles"):
        Trainer(too_many_cycles, progress=False)
    # 7 candidate widths x 1 step do not fit a first epoch of 4 steps
    sweep = TrainConfig(data=TINY_DATA, optim=OptimConfig(epochs=2, batch_size=20), model=ModelConfig(name="mlp"),
                        techniques={"cpt": Config(cycles=2, range_test=True, range_test_steps=1)})
    with pytest.raises(ConfigError, match=r"techniques\.cpt\.range_test_steps"):
        Trainer(sweep, progress=False)


# -- checkpoint / resume -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("stop_after", [3, 10])  # inside the range test's second window; after it, mid-cycle
def test_resume_is_bit_identical(tmp_path, stop_after):
    # 160 training samples / 20 = 8 steps per epoch; candidates 2..5 x 2 steps fill epoch 0
    config = TrainConfig(data=DataConfig(name="synthetic", synthetic_samples=200, test_fraction=0.2),
                         model=ModelConfig(depth=8, width=4), optim=OptimConfig(epochs=3, batch_size=20),
                         techniques={"cpt": Config(max_bits=5, cycles=3, range_test=True, range_test_steps=2,
                                                   range_test_samples=32, range_test_threshold=5.0)})
    straight = Trainer(config, progress=False)
    expected = straight.fit()
    checkpoint = tmp_path / "run.pt"
    assert Trainer(config, progress=False).fit(checkpoint=checkpoint, stop_after_steps=stop_after) is None
    saved = torch.load(checkpoint, weights_only=False)["techniques"][0]
    assert saved["range_state"]["done"] == (stop_after > 4)  # the sweep (2 then 3 bits) decides after step 4
    resumed_trainer = Trainer(config, progress=False)
    resumed = resumed_trainer.fit(checkpoint=checkpoint, resume=True)
    assert resumed.resumed_from_step == stop_after
    for key, value in straight.model.state_dict().items():
        assert torch.equal(value, resumed_trainer.model.state_dict()[key]), key
    assert resumed_trainer.ledger.state_dict() == straight.ledger.state_dict()
    assert resumed.techniques == expected.techniques
    assert resumed.history == expected.history
    assert Counter(expected.techniques["cpt"]["steps_by_forward_bits"]).total() == 24


# -- the branched range test -----------------------------------------------------------------------------------------

def _takeoff_config(**cpt):
    return TrainConfig(
        data=DataConfig(name="synthetic"), model=ModelConfig(name="mlp", hidden=()),  # one linear layer, 64 -> 10
        optim=OptimConfig(epochs=1, batch_size=8, lr=0.3, momentum=0.9, schedule="constant"),
        techniques={"cpt": Config(max_bits=8, cycles=1, **cpt)})


def test_branched_range_test_tries_every_width_from_the_same_start_and_leaves_the_run_untouched():
    dataset = _invisible_below_five_bits()
    branched = Trainer(_takeoff_config(range_test=True, range_test_mode="branched", range_test_start_bits=2,
                                       range_test_steps=4, range_test_samples=1000, range_test_threshold=20.0),
                       dataset=dataset, progress=False)
    result = branched.fit()
    report = result.techniques["cpt"]
    test = report["range_test"]
    assert test["mode"] == "branched" and test["candidates_tried"] == [2, 3, 4, 5]
    # every candidate starts from the untrained model: below 5 bits it predicts one class for all, 10 %
    assert test["accuracy_before"][:3] == test["accuracy_after"][:3] == [10.0, 10.0, 10.0]
    assert test["differences"][:3] == [0.0, 0.0, 0.0] and test["differences"][3] > 20.0
    assert report["min_bits"] == 5 and test["crossed"]
    # probe steps are not steps of the run: all 30 scheduled steps follow the cyclic schedule from B_min = 5
    assert test["training_steps"] == 0 and test["probe_steps"] == 16 and result.steps == 30
    assert sum(report["steps_by_forward_bits"].values()) == 30 and min(map(int, report["steps_by_forward_bits"])) == 5
    # the snapshot (weights, momentum, RNG) was restored: the model is bit for bit the run with B_min = 5 given
    plain = Trainer(_takeoff_config(min_bits=5), dataset=dataset, progress=False)
    plain_result = plain.fit()
    for key, value in plain.model.state_dict().items():
        assert torch.equal(value, branched.model.state_dict()[key]), key
    assert result.history[-1]["test_accuracy"] == plain_result.history[-1]["test_accuracy"]
    # the test's cost is on top, in the ledger: 16 probe forwards of 8 samples and 2 held passes per candidate
    held, probe = 2 * 4 * 240 * 640, 16 * 8 * 640
    assert test["held_forward_macs"] == held and test["probe_forward_macs"] == probe
    assert result.cost["by_phase"]["forward"]["macs"] == plain_result.cost["by_phase"]["forward"]["macs"] + held + probe
    assert (result.cost["by_phase"]["weight_grad"]["macs"]
            == plain_result.cost["by_phase"]["weight_grad"]["macs"] + probe)


def test_branched_range_test_needs_no_room_in_the_first_epoch_and_resumes_bit_identically(tmp_path):
    # 4 steps per epoch: 7 candidates x 1 step would not fit a sequential sweep, a branched one needs no steps
    config = TrainConfig(data=TINY_DATA, optim=OptimConfig(epochs=2, batch_size=20), model=ModelConfig(name="mlp"),
                         techniques={"cpt": Config(cycles=2, range_test=True, range_test_steps=2,
                                                   range_test_mode="branched", range_test_threshold=5.0)})
    straight = Trainer(config, progress=False)
    expected = straight.fit()
    checkpoint = tmp_path / "run.pt"
    assert Trainer(config, progress=False).fit(checkpoint=checkpoint, stop_after_steps=3) is None
    resumed_trainer = Trainer(config, progress=False)
    resumed = resumed_trainer.fit(checkpoint=checkpoint, resume=True)
    for key, value in straight.model.state_dict().items():
        assert torch.equal(value, resumed_trainer.model.state_dict()[key]), key
    assert resumed_trainer.ledger.state_dict() == straight.ledger.state_dict()
    assert resumed.techniques == expected.techniques and expected.techniques["cpt"]["range_test"]["done"]


def test_unknown_range_test_mode_is_refused_naming_the_field():
    with pytest.raises(ConfigError, match=r"techniques\.cpt\.range_test_mode"):
        TrainConfig(techniques={"cpt": Config(range_test=True, range_test_mode="interleaved")})
