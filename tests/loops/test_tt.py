"""The NumPy TT loop a board's host runs: set-up checks, its host arithmetic against torch's, pruning, training."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from codesign.design import load_design
from codesign.design.families.tt import tt_setup_of
from codesign.loops.common import HwTrainError
from codesign.loops.tt import TtMlpTrainer, TtTrainSetup
from codesign.step.tt.step import forward_sweep, step_plan
from codesign.loops.tt_update import keep_slices
from codesign.train.data import load_digits_dataset

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def setup() -> TtTrainSetup:
    return tt_setup_of(load_design(EXAMPLES / "digits_tt.toml"))


def _dense(cores) -> np.ndarray:
    """``W`` (M, N) multiplied out from TT cores (r, m, n, r'), float64."""
    w = np.ones((1, 1, 1))
    for core in cores:
        w = np.einsum("abr,rmns->ambns", w, core.astype(np.float64))
        a, m, b, n, s = w.shape
        w = w.reshape(a * m, b * n, s)
    return w[..., 0]


def test_the_set_up_round_trips_through_design_json_and_refuses_bad_fields(setup):
    assert TtTrainSetup.from_dict(setup.to_dict()) == setup
    values = setup.to_dict()
    chain = [dict(layer) for layer in values["layers"]]
    chain[1] = {**chain[1], "in_features": 32}
    bad = {
        "layers": (chain, r"layers\[1\]"),
        "precision": ({**values["precision"], "extra_bits": 3}, r"precision must be a table"),
        "schedule": ("step", r"schedule must be 'cosine' or 'constant', got 'step'"),
        "batch_size": (0, r"batch_size must be an int in \[1, 65536\], got 0"),
        "threshold": (1.0, r"threshold < 1"),
        "seed": (True, r"seed must be an int"),
    }
    for field, (value, message) in bad.items():
        with pytest.raises(HwTrainError, match=message):
            TtTrainSetup.from_dict({**values, field: value})
    wide = {**values, "precision": {**values["precision"], "grad_bits": 24}}
    with pytest.raises(ValueError, match=r"at most 16 bits"):
        TtTrainSetup.from_dict(wide)
    with pytest.raises(ValueError, match=r"hand_off must be one of \('float32', 'exact'\), got 'float16'"):
        TtTrainSetup.from_dict({**values, "precision": {**values["precision"], "hand_off": "float16"}})
    older = {**values, "precision": {k: v for k, v in values["precision"].items() if k != "hand_off"}}
    assert TtTrainSetup.from_dict(older) == setup  # a design.json written before the field: float32


def test_the_initial_cores_carry_the_drawn_matrix_norm(setup):
    trainer = TtMlpTrainer(setup)
    assert trainer.ranks() == [(1, 4, 4, 1), (1, 4, 4, 1)]
    for layer, cores in zip(setup.layers, trainer.cores):
        w = _dense(cores)
        assert w.shape == (layer["out_features"], layer["in_features"])
        bound = 1 / np.sqrt(layer["in_features"])
        # a uniform +-bound matrix has a Frobenius norm near bound * sqrt(M N / 3)
        expected = bound * np.sqrt(w.size / 3)
        assert 0.9 * expected < np.linalg.norm(w) < 1.1 * expected


def test_pruning_removes_a_dead_slice_from_both_cores_and_from_adam(setup):
    """A rank slice zeroed in both neighbouring cores is pruned; W is unchanged and Adam's moments follow."""
    trainer = TtMlpTrainer(dataclasses.replace(setup, threshold=1e-3))
    trainer.optimizer.step = 1
    cores = trainer.cores[0]
    cores[0][..., 2] = 0
    cores[1][2] = 0
    before = _dense(cores)
    for k, core in enumerate(cores):
        trainer.optimizer.moments[(0, k)] = (core + 1, core + 2)
    trainer.prune()
    assert trainer.ranks()[0] == (1, 3, 4, 1) and trainer.ranks()[1] == (1, 4, 4, 1)
    assert trainer.prune_events == [{"epoch": 0, "layer": 0, "ranks_before": [1, 4, 4, 1],
                                     "ranks_after": [1, 3, 4, 1]}]
    np.testing.assert_allclose(_dense(trainer.cores[0]), before, rtol=1e-6, atol=1e-7)
    for k, core in enumerate(trainer.cores[0]):
        m, v = trainer.optimizer.moments[(0, k)]
        assert m.shape == v.shape == core.shape
        np.testing.assert_array_equal(m, core + 1)
        np.testing.assert_array_equal(v, core + 2)
    assert [lam.size for lam in trainer.lambdas[0]] == [3, 4]


def test_the_loop_learns_the_digits_and_reads_the_validation_split(setup):
    data = load_digits_dataset(validation_fraction=0.15)
    trainer = TtMlpTrainer(dataclasses.replace(setup, epochs=6))
    history = trainer.fit(data, progress=False)
    assert len(history) == 6 and all("validation_accuracy" in row for row in history)
    assert history[-1]["loss"] < history[0]["loss"] / 2
    assert history[-1]["accuracy"] > 0.85, history  # chance is 0.1
    figures = trainer.throughput()
    assert figures["steps"] == 6 * (data.train_size // setup.batch_size)
    assert figures["replay_misses"] == 0 and figures["replayed"] > 0
    again = TtMlpTrainer(dataclasses.replace(setup, epochs=6))
    again.fit(data, progress=False)
    assert [row["loss"] for row in again.history] == [row["loss"] for row in history]  # seeded


def test_a_bad_batch_is_refused_before_any_state_changes(setup):
    trainer = TtMlpTrainer(setup)
    before = trainer.read_weights()
    with pytest.raises(HwTrainError, match=r"labels"):
        trainer.train_step(np.zeros((4, 64), np.float32), np.array([0, 1, 2, 10]))
    with pytest.raises(HwTrainError, match=r"need \(n, 64\)"):
        trainer.train_step(np.zeros((4, 63), np.float32), np.zeros(4, np.int64))
    with pytest.raises(ValueError, match=r"finite"):
        trainer.train_step(np.full((4, 64), np.nan, np.float32), np.zeros(4, np.int64))
    after = trainer.read_weights()
    assert after["step"] == 0
    assert all(np.array_equal(a, b) for a, b in zip(before["trackers"], after["trackers"]))


def test_a_slice_exactly_at_the_threshold_is_kept_and_the_warm_up_ramps_linearly(setup):
    """Directed edges: ``lambda == threshold * max`` keeps its slice (the rule is >=, one below it goes); ties at the
    min-rank floor keep the earlier index; the prior's weight rises linearly over the warm-up's steps and holds
    after it (0 at step 0, half at its middle, whole at its end), and is 0 without a prior."""
    lambdas = [np.array([1.0, 0.25, 0.25 - 1e-12, 0.5])]
    assert [k.tolist() for k in keep_slices(lambdas, 0.25, 1)] == [[0, 1, 3]]
    tied = [np.array([0.001, 1.0, 0.001, 0.001])]
    assert [k.tolist() for k in keep_slices(tied, 0.5, 3)] == [[0, 1, 2]]
    trainer = TtMlpTrainer(dataclasses.replace(setup, warmup_epochs=2, prior_weight=3.0))
    trainer.steps_per_epoch, trainer.train_size = 5, 100
    scales = []
    for step in (0, 5, 10, 15):
        trainer.step = step
        scales.append(trainer.prior_scale())
    assert scales == [0.0, 0.5 * 3.0 / 100, 3.0 / 100, 3.0 / 100]
    trainer.setup = dataclasses.replace(trainer.setup, warmup_epochs=0)
    trainer.step = 0
    assert trainer.prior_scale() == 3.0 / 100  # no warm-up: whole from the first step
    trainer.setup = dataclasses.replace(trainer.setup, prior_weight=0.0)
    assert trainer.prior_scale() == 0.0


def test_a_split_is_evaluated_a_batch_at_a_time_with_the_logits_of_one_whole_pass(setup):
    """Evaluation feeds ``batch_size`` rows per forward pass (a whole split at once would hold gigabytes of states
    at paper 003's ranks); once a step has set the trackers the logits equal those of one pass over every row."""
    data = load_digits_dataset(validation_fraction=0.15)
    trainer = TtMlpTrainer(setup)
    trainer.train_step(data.train_x[:setup.batch_size], data.train_y[:setup.batch_size])
    rows = 3 * setup.batch_size + 5  # three whole batches and a short one
    x = np.asarray(data.test_x[:rows], np.float32).reshape(rows, -1)
    seen = []
    forward = trainer._forward
    trainer._forward = lambda part, training: seen.append(len(part)) or forward(part, training=training)
    chunked = trainer.logits(x)
    assert seen == [setup.batch_size] * 3 + [5]
    np.testing.assert_array_equal(chunked, forward(x, training=False)[0])
    labels = np.asarray(data.test_y[:rows], np.int64)
    assert trainer.evaluate(x, labels) == float(np.mean(np.argmax(chunked, 1) == labels))


def test_an_exact_hand_off_passes_what_the_pes_computed_between_the_layers(setup, monkeypatch):
    """With ``precision.hand_off = "exact"`` the hidden layer's input is the layer below's output (its sweep's
    float64 values) through ReLU, the logits the last sweep's, and the loss gradient and the input gradient
    reach the layer below unrounded, bit for bit; with ``"float32"`` each is rounded to float32 first. Biases
    far finer than the activations make the outputs pass float32's 24 bits; the two hand-offs train apart (the
    loss gradient's float64 would be enough for that)."""
    import codesign.loops.tt as loop_module

    tracked = {**setup.precision, "scale_rule": "tracked"}
    rng = np.random.default_rng(5)
    x, y = rng.random((setup.batch_size, 64)).astype(np.float32), rng.integers(0, 10, setup.batch_size)
    words, real = {}, loop_module.pe_step
    for hand_off, dtype in (("float32", np.float32), ("exact", np.float64)):
        trainer = TtMlpTrainer(dataclasses.replace(setup, precision={**tracked, "hand_off": hand_off}))
        trainer.biases = [np.random.default_rng(6).uniform(-1e-7, 1e-7, bias.shape).astype(np.float32)
                          for bias in trainer.biases]
        logits, inputs, _ = trainer._forward(x, training=False)  # the scales aimed at this batch and these biases
        for index, (given, passed) in enumerate(((x, inputs[1]), (inputs[1], logits))):
            state = trainer.layer_state(index)
            out = forward_sweep(state, given, step_plan(state, len(x), trainer.hardware), trainer.runner,
                                update=False).y.astype(dtype)
            assert passed.dtype == dtype and passed.tobytes() == (np.maximum(out, 0) if index == 0 else out).tobytes()
        assert hand_off == "float32" or (inputs[1].astype(np.float32) != inputs[1]).any()
        calls = []

        def spy(layer, x_in, grad_y, *args, **kwargs):
            calls.append((x_in, grad_y, real(layer, x_in, grad_y, *args, **kwargs)))
            return calls[-1][-1]
        monkeypatch.setattr(loop_module, "pe_step", spy)
        for _ in range(3):
            calls.clear()
            trainer.train_step(x, y)
        monkeypatch.undo()
        (x1, loss_grad, top), (_, grad_0, _) = calls  # the backward from the last layer down
        assert loss_grad.dtype == grad_0.dtype == x1.dtype == top.grad_x.dtype == dtype
        assert grad_0.tobytes() == (top.grad_x * (x1 > 0)).tobytes()
        words[hand_off] = trainer.read_weights()
    assert any(not np.array_equal(a, b) for key in ("cores", "means")
               for a, b in zip(words["float32"][key], words["exact"][key]))
