"""A tiny shared study (two MLP arms on synthetic data, three seeds crossed with three splits), trained once per
session and read by the tests of the study, its tuning, its cost and its summaries."""

import pytest

from codesign.reproduce.arms import Arm
from codesign.reproduce.common import Execution
from codesign.reproduce.study import run_study
from codesign.train.config import DataConfig, ModelConfig, OptimConfig, TrainConfig
from codesign.train.techniques.psg import Config as PsgConfig

TINY = TrainConfig(data=DataConfig(name="synthetic", synthetic_samples=60), model=ModelConfig(name="mlp", hidden=(16,)),
                   optim=OptimConfig(epochs=1, batch_size=16))


def tiny_arms() -> list[Arm]:
    return [Arm("base", TINY, baseline=True, tune={"optim.lr": (0.1, 0.01)}),
            Arm("fixed", TINY.replace(techniques={"psg": PsgConfig(predict=False)}), tune={"optim.lr": (0.1, 0.01)})]


@pytest.fixture(scope="session")
def study(tmp_path_factory):
    """(report folder, arms, evaluation runs, tuning record) of the tiny study."""
    out = tmp_path_factory.mktemp("study")
    arms = tiny_arms()
    runs, tuning = run_study(arms, [0, 1, 2], out, execution=Execution(progress=False))
    return out, arms, runs, tuning
