"""The list model's rounding stage (:mod:`codesign.step.list_round`) against the stated latency of
``rtl/accel/accel_round.v`` (the RTL itself is timed against the same latency in tests/rtl/test_accel_round.py;
the whole model against the RTL's busy cycles in tests/step/test_list_cycles.py)."""

from __future__ import annotations

import pytest

from codesign.numerics.round_stage import RoundStageConfig, latency_cycles
from codesign.step.list_round import RoundStage


@pytest.mark.parametrize("cfg, count", [
    (RoundStageConfig(enable=False, shift=0, bits=8, lanes=1, group_words=1, row_values=1), 37),
    (RoundStageConfig(enable=True, shift=-7, bits=8, lanes=4, group_words=1, row_values=12), 48),
    (RoundStageConfig(enable=True, shift=-3, bits=4, lanes=3, group_words=4, row_values=5), 40),
    (RoundStageConfig(enable=True, shift=2, bits=16, lanes=5, group_words=3, row_values=7), 63),
])
@pytest.mark.parametrize("parts", [1, 2, 4])
def test_round_stage_busy_is_latency_cycles(cfg, count, parts):
    """The model's rounding stage, offered min(parts, left) values every cycle, every word it offers taken, is busy
    latency_cycles cycles."""
    stage = RoundStage(parts)
    stage.start(cfg, count)
    busy = 0
    while stage.busy:
        busy += 1
        shakes = stage.handshakes(parts)
        stage.edge(min(parts, stage.left, shakes[0]), shakes)
    assert busy == latency_cycles(cfg, count, parts)
