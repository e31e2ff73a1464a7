"""What the training tests share: a run killed at a step and resumed from its checkpoint, against one that was not."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import torch

from codesign.train.trainer import Trainer


@dataclass
class Resumed:
    """An uninterrupted run and the same run killed after ``stop_after`` steps and resumed: trainers and results."""

    uninterrupted: Trainer
    expected: Any
    resumed: Trainer
    result: Any


def kill_and_resume(config, stop_after: int, checkpoint) -> Resumed:
    """Train ``config`` straight through; train it again, stop after ``stop_after`` steps writing ``checkpoint``,
    resume from it. Checks what every resumable run must give: the resume point, the model's tensors bit for bit
    and every MAC and DRAM count of the ledger."""
    uninterrupted = Trainer(config, progress=False)
    expected = uninterrupted.fit()
    assert Trainer(config, progress=False).fit(checkpoint=checkpoint, stop_after_steps=stop_after) is None
    resumed = Trainer(config, progress=False)
    result = resumed.fit(checkpoint=checkpoint, resume=True)
    assert result.resumed_from_step == stop_after
    for (name, a), b in zip(uninterrupted.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.equal(a, b), name
    assert resumed.ledger.state_dict() == uninterrupted.ledger.state_dict()
    return Resumed(uninterrupted=uninterrupted, expected=expected, resumed=resumed, result=result)


@pytest.fixture(name="kill_and_resume")
def kill_and_resume_fixture():
    return kill_and_resume
