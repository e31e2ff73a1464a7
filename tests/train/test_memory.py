"""The peak-memory check before training: the estimate against measured peaks, and refusals before anything is written.

The estimate is an upper bound on how much a run's process grows. It is
checked against the peak resident memory (``VmHWM``) of real runs, each in a
fresh interpreter so that nothing earlier in the test session is counted:
never below the measured growth, and at most :data:`RATIO` times above it, for
configurations where each part of the estimate dominates in turn (dense
weights, convolution activations, a large data split, TT layers).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from codesign.cli import main
from codesign.train.config import DataConfig, ModelConfig, OptimConfig, TrainConfig
from codesign.train.memory import RunTooLargeError, check_memory, estimate_peak_memory
from codesign.train.models import build_model

RATIO = 3.0  # the estimate may be this many times the measured growth, no more

MEASURE = """
import json, sys
import torch
from codesign.train.config import load_config
from codesign.train.trainer import Trainer

def rss(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024

torch.set_num_threads(1)
config = load_config(sys.argv[1])
base = rss("VmRSS:")  # torch and the trainer imported: what the estimate does not cover
trainer = Trainer(config, progress=False)
trainer.fit(stop_after_steps=3)
trainer.evaluate()
print(json.dumps({"growth": rss("VmHWM:") - base}))
"""

MEASURED = {
    "dense_mlp_4096x4096": 'model = {name = "mlp", hidden = [4096, 4096]}\ndata = {name = "synthetic", '
                           'synthetic_samples = 2000}\n',
    "resnet_width64_batch256": 'model = {name = "resnet", width = 64}\noptim = {batch_size = 256}\n',
    "synthetic_200k_samples": 'model = {name = "mlp", hidden = [1024]}\ndata = {name = "synthetic", '
                              'synthetic_samples = 200000}\n',
    "tt_mlp_4096": 'model = {name = "mlp", hidden = [4096]}\ntechniques = {tt = {}}\n',
}


def _measured_growth(path) -> int:
    run = subprocess.run([sys.executable, "-c", MEASURE, str(path)], capture_output=True, text=True, timeout=600,
                         check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout.strip().splitlines()[-1])["growth"]


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the peak from /proc/self/status")
@pytest.mark.parametrize("name", MEASURED)
def test_the_estimate_bounds_the_measured_peak_within_a_ratio(tmp_path, name):
    from codesign.train.config import load_config

    path = tmp_path / "run.toml"
    path.write_text(MEASURED[name])
    estimate = estimate_peak_memory(load_config(path)).total
    growth = _measured_growth(path)
    assert growth > 0
    assert estimate >= growth, f"{name}: estimate {estimate / 2**20:.0f} MiB below the measured {growth / 2**20:.0f}"
    assert estimate <= RATIO * growth, f"{name}: estimate {estimate / 2**20:.0f} MiB, measured {growth / 2**20:.0f}"


@pytest.mark.parametrize("model", [ModelConfig(name="mlp", hidden=(16,)), ModelConfig(name="mlp", hidden=(300, 7)),
                                   ModelConfig(name="resnet"), ModelConfig(name="resnet", depth=14, width=32)],
                         ids=["mlp16", "mlp300x7", "resnet8", "resnet14w32"])
def test_the_parameter_count_is_the_built_models(model):
    """Shapes from the meta device: the same count as the model built for real."""
    built = build_model(model.name, depth=model.depth, hidden=model.hidden, width=model.width)
    assert estimate_peak_memory(TrainConfig(model=model)).parameters == sum(p.numel() for p in built.parameters())


def test_each_part_grows_with_the_field_named_for_it():
    base = TrainConfig(model=ModelConfig(name="mlp", hidden=(256,)), data=DataConfig(name="synthetic"))
    small = estimate_peak_memory(base).parts
    bigger_batch = estimate_peak_memory(TrainConfig(model=base.model, data=base.data,
                                                    optim=OptimConfig(batch_size=128))).parts
    assert bigger_batch["activations"] == 2 * small["activations"]
    more_data = estimate_peak_memory(TrainConfig(model=base.model, data=DataConfig(name="synthetic",
                                                                                   synthetic_samples=6000))).parts
    assert more_data["data"] == 10 * small["data"] and more_data["evaluation"] == 10 * small["evaluation"]
    wider = estimate_peak_memory(TrainConfig(model=ModelConfig(name="mlp", hidden=(512,)), data=base.data)).parts
    assert wider["parameters"] > 1.9 * small["parameters"] and wider["tt_initialisation"] == 0


def test_a_run_is_refused_when_its_estimate_exceeds_what_is_available():
    config = TrainConfig(model=ModelConfig(name="mlp", hidden=(1024,)))
    total = estimate_peak_memory(config).total
    assert check_memory(config, available=total).total == total  # exactly enough: taken
    with pytest.raises(RunTooLargeError, match=r"needs about .* at its peak .* more than the .* available") as caught:
        check_memory(config, available=total - 1)
    assert isinstance(caught.value, ValueError)


HUGE = {"dense": 'model = {name = "mlp", hidden = [65536, 65536]}\n',
        "tt": 'model = {name = "mlp", hidden = [65536, 65536]}\ntechniques = {tt = {}}\n',
        "resnet_batch": 'model = {name = "resnet", width = 256, depth = 20}\noptim = {batch_size = 65536}\n'}


@pytest.mark.parametrize("name", HUGE)
def test_the_cli_refuses_a_run_too_large_before_writing(tmp_path, capsys, name):
    path = tmp_path / "huge.toml"
    path.write_text(HUGE[name])
    out = tmp_path / "out"
    started = time.perf_counter()
    assert main(["train", str(path), "--out", str(out)]) == 2
    assert time.perf_counter() - started < 10.0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "GiB at its peak" in err and "available on this machine" in err
    assert "model.hidden" in err or "model.width" in err or "optim.batch_size" in err
    assert not out.exists()


def test_the_trainer_refuses_before_building_anything(monkeypatch):
    """The API checks too: the model is never built, the data never loaded."""
    import codesign.train.trainer as trainer_module

    def not_called(*args, **kwargs):
        raise AssertionError("built or loaded before the memory check")

    monkeypatch.setattr(trainer_module, "load_dataset", not_called)
    monkeypatch.setattr(trainer_module, "configured_model", not_called)
    with pytest.raises(RunTooLargeError, match="model.hidden"):
        trainer_module.Trainer(TrainConfig(model=ModelConfig(name="mlp", hidden=(65536, 65536))))
