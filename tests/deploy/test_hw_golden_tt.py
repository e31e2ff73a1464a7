"""The golden TT loop on PE calls: its forward sweep against the golden layer's, and a whole run against the trainer.

The expected values are the golden model itself: TTLinear's forward in
training and evaluation mode (codesign.train.tt.layer), and a run of
codesign.train.trainer on the same configuration with techniques.tt. The
loop under test computes every contraction with the golden PE kernels on
small PE builds, so contractions are cut into many calls (partial sums on
the host).
"""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from codesign.boards import board
from codesign.design.point import DesignPoint, PeInstance
from codesign.step.tt.schedule import StepHardware
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec, Tt3Spec
from codesign.step.tt.step import GoldenRunner
from codesign.train.config import DataConfig, ModelConfig, OptimConfig, TrainConfig
from codesign.train.data import synthetic_dataset
from codesign.loops.common import HwTrainError
from codesign.train.hw_golden_tt import TtHwTrainer, design_hardware, pe_forward, run_on_pes
from codesign.train.models import MLP
from codesign.train.techniques.tt import Config
from codesign.train.trainer import Trainer
from codesign.train.tt import RankPrior, TTLinear, TTPrecision, tt_layers
from codesign.train.tt.pe_check import means_of, trackers_of

# PE builds far smaller than the contractions: every one is cut along I, J, K and L
SMALL_HARDWARE = StepHardware(pe1=Tt1Spec(lanes=4, rows=3, a_bits=16, b_bits=8, max_j=5, max_k=9, max_l=7),
                              pe2=Tt2Spec(lanes=4, rows=3, a_bits=16, b_bits=4, max_j=5, max_k=9, max_l=7),
                              pe3=Tt3Spec(lanes=4, a_bits=8, b_bits=16, max_j=9))
# 160 synthetic training images in batches of 40 (4 steps per epoch), 40 test images
CONFIG = TrainConfig(seed=11, data=DataConfig(name="synthetic", synthetic_samples=200, test_fraction=0.2),
                     model=ModelConfig(name="mlp", hidden=(16,)),
                     optim=OptimConfig(epochs=2, batch_size=40, lr=0.02, weight_decay=0.0),
                     techniques={"tt": Config(max_rank=3, order=2,
                                              prior=RankPrior(warmup_epochs=1, threshold=0.9, prune_from_epoch=0))})


def _layer(in_modes, out_modes, rank, seed=0):
    torch.manual_seed(seed)
    return TTLinear(math.prod(in_modes), math.prod(out_modes), in_modes=in_modes, out_modes=out_modes,
                    max_rank=rank, precision=TTPrecision())


def _batch(layer, batch, *, seed=1, extremes=False):
    x = np.maximum(np.random.default_rng(seed).normal(size=(batch, layer.in_features)), 0).astype(np.float32)
    if extremes:
        x[0] = 0.0  # a zero sample
        x[-1, 0] = 1e4  # saturates at 8 bits
        x[1, :] = 2.0 ** -20  # far below the step of the scale the rest sets: rounds to 0
    return x


def _bits(values) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)


SHAPES = [((4, 4, 4), (4, 4, 4), 4, 5), ((8, 8), (2, 5), 3, 17), ((3, 5, 7), (2, 3, 2), (2, 3), 33), ((6,), (5,), 1, 3)]


@pytest.mark.parametrize("in_modes, out_modes, rank, batch", SHAPES)
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("extremes", [False, True], ids=["random", "directed"])
def test_forward_sweep_equals_the_golden_layer_bit_for_bit(in_modes, out_modes, rank, batch, training, extremes):
    layer = _layer(in_modes, out_modes, rank)
    x = _batch(layer, batch, extremes=extremes)
    if not training:  # a trained layer's scales: one training forward first, then evaluation keeps them
        layer.train()
        layer(torch.from_numpy(_batch(layer, batch, seed=7)))
    expected = copy.deepcopy(layer).train(training)
    y = expected(torch.from_numpy(x)).detach().numpy()
    before = trackers_of(layer)
    got = pe_forward(layer, x, GoldenRunner(), SMALL_HARDWARE, update=training)
    assert np.count_nonzero(_bits(y) != _bits(got.y)) == 0
    assert got.trackers == trackers_of(expected)
    assert trackers_of(layer) == before  # the layer is not changed; the caller stores the new scales


def test_evaluation_aims_only_unset_scales():
    layer = _layer((4, 4), (4, 4), 2)
    x = _batch(layer, 8)
    expected = copy.deepcopy(layer).eval()
    y = expected(torch.from_numpy(x)).detach().numpy()
    got = pe_forward(layer, x, GoldenRunner(), update=False)
    assert np.array_equal(_bits(y), _bits(got.y)) and got.trackers == trackers_of(expected)
    assert trackers_of(layer)["act_frac_bits"] != got.trackers["act_frac_bits"]  # they were unset, and got aimed


def _state(trainer: Trainer) -> dict[str, list[np.ndarray]]:
    """Shadow cores, biases and Adam moments of a trainer's TT layers, and their scale trackers."""
    cores, moments, trackers = [], [], []
    for layer in tt_layers(trainer.model):
        cores += [p.detach().numpy() for p in layer.parameters()]
        moments += [trainer.optimizer.state[p][key].numpy() for p in layer.parameters()
                    for key in ("exp_avg", "exp_avg_sq")]
        trackers.append((trackers_of(layer), means_of(layer)))
    return {"parameters": cores, "moments": moments, "trackers": trackers}


def _compare(a: dict, b: dict) -> tuple[int, int]:
    """(32-bit words compared, words that differ) over parameters and moments; trackers must be equal."""
    compared = differ = 0
    for key in ("parameters", "moments"):
        assert len(a[key]) == len(b[key])
        for x, y in zip(a[key], b[key]):
            assert x.shape == y.shape
            compared += x.size
            differ += int(np.count_nonzero(_bits(x) != _bits(y)))
    assert a["trackers"] == b["trackers"]
    return compared, differ


@pytest.mark.parametrize("scale_rule, hand_off", [("exact", "float32"), ("tracked", "float32"),
                                                  ("tracked", "exact")])
def test_a_run_on_pe_calls_ends_bit_identical_to_the_trainers_golden_run(scale_rule, hand_off):
    """Two epochs, 8 Adam steps, the prior pruning ranks after epoch 0, evaluation after each epoch; under both
    scale rules (tracked: every tensor rounded at the scale its running mean gave the step before), and with the
    layers' outputs and input gradients passed on in float32 or exactly."""
    tt = CONFIG.techniques["tt"]
    config = CONFIG.replace(techniques={"tt": dataclasses.replace(
        tt, precision=dataclasses.replace(tt.precision, scale_rule=scale_rule, hand_off=hand_off))})
    golden = Trainer(config, progress=False)
    golden.fit()
    loop = TtHwTrainer(config, hardware=SMALL_HARDWARE)
    history = loop.fit(progress=False)
    assert history == golden.history  # test accuracy, loss and modelled energy of every epoch
    assert [layer.ranks for layer in loop.layers] == [layer.ranks for layer in tt_layers(golden.model)]
    assert loop.trainer.techniques[0].prune_events, "the run prunes, so later steps run on smaller cores"
    compared, differ = _compare(_state(loop.trainer), _state(golden))
    parameters = sum(int(p.numel()) for p in golden.model.parameters())
    assert compared == 3 * parameters and differ == 0
    figures = loop.throughput()
    assert figures["steps"] == 8 and figures["replay_misses"] == 0
    assert 0 < figures["replayed_transactions"] < figures["pe_transactions"]
    assert figures["macs"] > 0 and figures["steps_per_s"] > 0
    read = loop.read_weights()
    assert read["ranks"] == [layer.ranks for layer in loop.layers] and read["step"] == 8


def test_manual_steps_and_predict_match_the_trainer():
    golden, loop = Trainer(CONFIG, progress=False), TtHwTrainer(CONFIG, hardware=SMALL_HARDWARE)
    data = golden.dataset
    for start in (0, 40, 80):
        x, y = data.train_x[start:start + 40], data.train_y[start:start + 40]
        expected = golden.train_step(x, y)
        golden.global_step += 1
        assert loop.train_step(x.numpy(), y.numpy()) == expected
    golden.model.eval()
    with torch.no_grad():
        expected = golden.model(data.test_x).argmax(dim=1).numpy()
    assert np.array_equal(loop.predict(data.test_x), expected)
    assert loop.evaluate(data.test_x, data.test_y) == pytest.approx(float(np.mean(expected == data.test_y.numpy())))
    assert _compare(_state(loop.trainer), _state(golden))[1] == 0


def test_weights_load_and_read_back():
    loop = TtHwTrainer(CONFIG, hardware=SMALL_HARDWARE)
    state = loop.read_weights()
    scaled = {"cores": [[core * 0.5 for core in layer] for layer in state["cores"]],
              "biases": [bias - 1.0 for bias in state["biases"]]}
    loop.load_weights(scaled)
    again = loop.read_weights()
    for mine, theirs in zip(again["cores"], scaled["cores"]):
        assert all(np.array_equal(a, b) for a, b in zip(mine, theirs))
    assert all(np.array_equal(a, b) for a, b in zip(again["biases"], scaled["biases"]))


@pytest.mark.parametrize("change, message", [
    (lambda s: {**s, "cores": s["cores"][:1]}, r"1 layers of cores, the model has 2"),
    (lambda s: {"biases": s["biases"]}, r"state lacks 'cores'"),
    (lambda s: {**s, "cores": [s["cores"][0], [c[..., :1] for c in s["cores"][1]]]}, r"layer 1 needs float arrays"),
    (lambda s: {**s, "cores": [[c.astype(np.int32) for c in s["cores"][0]], s["cores"][1]]}, r"layer 0 needs float"),
    (lambda s: {**s, "biases": [s["biases"][0], s["biases"][1] * np.nan]}, r"layer 1 holds values that are not finite"),
])
def test_bad_weights_are_refused_before_anything_changes(change, message):
    loop = TtHwTrainer(CONFIG, hardware=SMALL_HARDWARE)
    before = loop.read_weights()
    with pytest.raises(HwTrainError, match=message):
        loop.load_weights(change(before))
    after = loop.read_weights()
    assert all(np.array_equal(a, b) for la, lb in zip(before["cores"], after["cores"]) for a, b in zip(la, lb))


def test_bad_set_ups_and_batches_are_refused():
    with pytest.raises(HwTrainError, match=r"configuration with techniques\.tt"):
        TtHwTrainer(replace(CONFIG, techniques={}))
    narrow = StepHardware(pe1=Tt1Spec(a_bits=16, b_bits=8), pe2=Tt2Spec(a_bits=8, b_bits=4))
    with pytest.raises(HwTrainError, match=r"tt2 is built for 8 x 4-bit operands; techniques\.tt\.precision needs 16 x 4"):
        TtHwTrainer(CONFIG, hardware=narrow)
    loop = TtHwTrainer(CONFIG, hardware=SMALL_HARDWARE)
    with pytest.raises(HwTrainError, match=r"batch x \(4, 63\), y \(4,\)"):
        loop.train_step(np.zeros((4, 63), dtype=np.float32), np.zeros(4, dtype=np.int64))
    with pytest.raises(HwTrainError, match=r"batch x \(4, 64\), y \(3,\)"):
        loop.train_step(np.zeros((4, 64), dtype=np.float32), np.zeros(3, dtype=np.int64))
    with pytest.raises(ValueError, match=r"x must be finite"):
        pe_forward(loop.layers[0], np.full((2, 64), np.inf, dtype=np.float32), GoldenRunner())
    with pytest.raises(HwTrainError, match=r"no TT layer"):
        run_on_pes(MLP(), loop.backend)
    with pytest.raises(ValueError, match=r"PEs need a low-precision TTPrecision"):
        run_on_pes(torch.nn.Sequential(TTLinear(4, 4, in_modes=(2, 2), out_modes=(2, 2), max_rank=1)), loop.backend)


def test_design_hardware_takes_the_tt_instances():
    specs = {"tt1": Tt1Spec(a_bits=16, b_bits=8, lanes=8), "tt2": Tt2Spec(a_bits=16, rows=2), "tt3": Tt3Spec(lanes=4)}
    instances = tuple(PeInstance(name=f"{pe}_0", pe=pe, spec=spec, reason="test") for pe, spec in specs.items())
    design = DesignPoint(name="tt", training=CONFIG, board=board("zedboard"), clock_mhz=100.0, instances=instances)
    assert design_hardware(design) == StepHardware(pe1=specs["tt1"], pe2=specs["tt2"], pe3=specs["tt3"])
    with pytest.raises(HwTrainError, match=r"has no tt2 instance"):
        design_hardware(replace(design, instances=instances[:1]))
    copies = tuple(PeInstance(name=f"tt2_{n}", pe="tt2", spec=specs["tt2"], reason="test") for n in (1, 2))
    assert design_hardware(replace(design, instances=instances + copies)) == StepHardware(
        pe1=specs["tt1"], pe2=specs["tt2"], pe3=specs["tt3"], pe2_units=3)
    other = PeInstance(name="tt2_1", pe="tt2", spec=Tt2Spec(a_bits=16, rows=4), reason="test")
    with pytest.raises(HwTrainError, match=r"tt2_0, tt2_1 are different builds"):
        design_hardware(replace(design, instances=(*instances, other)))
    second_pe3 = PeInstance(name="tt3_1", pe="tt3", spec=specs["tt3"], reason="test")
    with pytest.raises(HwTrainError, match=r"2 tt3 instances; the step runs PE3"):
        design_hardware(replace(design, instances=(*instances, second_pe3)))


class FailingRunner(GoldenRunner):
    """The golden kernels, failing on one chosen ``run`` (counted from 1), as an IP that never raises ap_done would.

    ``seen`` is called with nothing at the moment of the failure, to record the trainer's state then.
    """

    def __init__(self) -> None:
        super().__init__()
        self.runs, self.fail_at, self.seen = 0, None, None

    def run(self, hardware, calls):
        self.runs += 1
        if self.runs == self.fail_at:
            self.seen()
            raise RuntimeError("ap_done never rose")
        return super().run(hardware, calls)


def test_a_runner_failing_part_way_leaves_the_step_undone():
    runner = FailingRunner()
    loop = TtHwTrainer(CONFIG, hardware=SMALL_HARDWARE, runner=runner)
    reference = TtHwTrainer(CONFIG, hardware=SMALL_HARDWARE)
    data = loop.trainer.dataset
    first, second = [(data.train_x[s:s + 40].numpy(), data.train_y[s:s + 40].numpy()) for s in (0, 40)]
    for trainer in (loop, reference):
        trainer.train_step(*first)
    before, ledger = copy.deepcopy(_state(loop.trainer)), copy.deepcopy(loop.trainer.ledger.state_dict())
    dirty = {}
    runner.seen = lambda: dirty.update(ledger=copy.deepcopy(loop.trainer.ledger.state_dict()))
    runner.fail_at = 2 * runner.runs  # the second step's last run: in the backward pass, after the forward pass
    with pytest.raises(RuntimeError, match="ap_done"):
        loop.train_step(*second)
    assert dirty["ledger"] != ledger  # the forward pass had already been counted when the run failed ...
    assert loop.trainer.ledger.state_dict() == ledger  # ... and is taken back with the rest
    compared, differ = _compare(_state(loop.trainer), before)
    assert compared > 0 and differ == 0
    assert loop.trainer.global_step == reference.trainer.global_step == 1 and loop.steps == 1
    for trainer in (loop, reference):  # the retried step equals a step that never failed
        trainer.train_step(*second)
    assert _compare(_state(loop.trainer), _state(reference.trainer))[1] == 0
    assert loop.trainer.ledger.state_dict() == reference.trainer.ledger.state_dict()


def test_fit_in_parts_equals_one_fit_and_refuses_bad_parts():
    whole, parts = TtHwTrainer(CONFIG, hardware=SMALL_HARDWARE), TtHwTrainer(CONFIG, hardware=SMALL_HARDWARE)
    whole.fit(progress=False)
    assert len(parts.fit(epochs=1, progress=False)) == 1
    with pytest.raises(HwTrainError, match="1 of the configured 2 epochs remain"):
        parts.fit(epochs=2, progress=False)
    other = synthetic_dataset(samples=100)
    with pytest.raises(HwTrainError, match="training samples"):
        parts.fit(other, progress=False)
    history = parts.fit(parts.trainer.dataset, epochs=1, progress=False)
    assert history == whole.trainer.history
    assert _compare(_state(parts.trainer), _state(whole.trainer))[1] == 0
    with pytest.raises(HwTrainError, match="all 2 configured epochs are trained"):
        parts.fit(progress=False)
    for bad in (0, -1, True, 1.0):
        with pytest.raises(HwTrainError, match="epochs="):
            TtHwTrainer(CONFIG, hardware=SMALL_HARDWARE).fit(epochs=bad, progress=False)
