"""codesign.api.Design: one object for a design, from a TOML file or keyword arguments, whose methods do what the
commands do, and whose trained weights come back as floats that a torch model of the same layers computes with."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from codesign.api import Design
from codesign.loops.data import as_arrays
from codesign.train.trainer import load_dataset

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(scope="module")
def abvs():
    design = Design.from_toml(EXAMPLES / "digits_abvs.toml")
    design.train(epochs=2, lr=0.3)
    return design


@pytest.mark.slow  # the design's fit and training: 22 to 28 s
def test_a_toml_design_fits_trains_and_gives_float_weights_a_torch_mlp_computes_with(abvs):
    torch = pytest.importorskip("torch")
    from codesign.train.models import MLP

    assert repr(abvs) == "Design('digits_abvs' on zedboard: fpmac_array_0, fpmac_array_1)" and abvs.fit().fits
    layers = abvs.weights()
    assert [(layer["weight"].shape, layer["bias"].shape) for layer in layers] == [((64, 64), (64,)),
                                                                                    ((32, 64), (32,)), ((10, 32), (10,))]
    assert all(layer["weight"].dtype == np.float32 and np.all(np.isfinite(layer["weight"])) for layer in layers)
    model = MLP(inputs=64, hidden=(64, 32), classes=10)
    model.load_state_dict(abvs.state_dict())
    data = as_arrays(load_dataset(abvs.point.training))
    with torch.no_grad():
        float_predictions = model(torch.from_numpy(data.test_x)).argmax(1).numpy()
    agree = float(np.mean(float_predictions == abvs.trainer.predict(data.test_x)))
    assert agree >= 0.98, agree  # the FB-float arithmetic rounds each product; float32 does not


@pytest.mark.slow  # trains a design of every family: 19 s
def test_keyword_arguments_make_the_same_kind_of_design_and_every_family_gives_weights():
    tt = Design.from_config(model={"name": "mlp", "hidden": [16]}, techniques={"tt": {"order": 2, "max_rank": 2}},
                            optim={"epochs": 1}, name="tiny_tt")
    assert [instance.pe for instance in tt.point.instances] == ["tt1", "tt2", "tt3"]
    tt.train(max_steps=2)
    assert [layer["weight"].shape for layer in tt.weights()] == [(16, 64), (10, 16)]
    csb = Design.from_toml(EXAMPLES / "digits_compressed_mlp.toml")
    csb.train(max_steps=2)
    state = csb.trainer.read_weights()
    for layer, mask in zip(csb.weights(), state["masks"]):
        assert layer["bias"] is None and np.all(layer["weight"][mask == 0] == 0)


@pytest.mark.slow  # 28 s: an emulated board's training, C-sim and RTL of the array
def test_training_on_the_emulated_board_equals_the_golden_loop_and_the_artefacts_are_written(abvs, tmp_path):
    board = Design.from_toml(EXAMPLES / "digits_abvs.toml")
    board.train_on(board.overlay(), epochs=1, max_steps=2)
    golden = Design.from_toml(EXAMPLES / "digits_abvs.toml")
    golden.train(epochs=1, max_steps=2)
    for mine, theirs in zip(board.weights(), golden.weights()):
        assert np.array_equal(mine["weight"], theirs["weight"]) and np.array_equal(mine["bias"], theirs["bias"])
    folder = abvs.build(tmp_path / "build")
    assert (folder.root / "design.json").is_file() and folder.fit.fits
    assert abvs.bundle(tmp_path / "bundle").name == "digits_abvs-zedboard"
    reports = abvs.verify(tmp_path / "verify", levels=("golden",))
    assert list(reports) == ["fpmac_array_0", "fpmac_array_1"] and all(r.passed for r in reports.values())


@pytest.mark.slow  # the space, its host measured, Yosys confirmations: about 3 min
def test_explore_writes_the_commands_reports(tmp_path):
    result = Design.from_toml(EXAMPLES / "digits_abvs.toml").explore(tmp_path / "explore")
    assert result["space"].feasible[result["chosen"]]
    for name in ("estimate_network_performance.json", "chosen.toml", "pareto.png", "roofline.png"):
        assert (tmp_path / "explore" / name).is_file()


def test_misuse_is_refused_by_name():
    fresh = Design.from_toml(EXAMPLES / "digits_abvs.toml")
    with pytest.raises(ValueError, match="nothing trained yet"):
        fresh.weights()
    with pytest.raises(ValueError, match="the CSB loop cannot train it"):
        Design.from_toml(EXAMPLES / "digits_compressed.toml").train()
    with pytest.raises(ValueError, match="model.name"):
        Design.from_config(model={"name": "transformer"})
