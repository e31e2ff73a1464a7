import math

import pytest

from codesign.energy import horowitz_45nm


def test_anchors_and_scaling_follow_horowitz():
    table = horowitz_45nm()
    assert table.int_mul(8, 8) == pytest.approx(0.2)
    assert table.int_mul(32, 32) == pytest.approx(3.1)
    # between anchors: a power law in the bit product, close to linear
    assert table.int_mul(16, 16) == pytest.approx(0.2 * 4 ** (math.log(15.5) / math.log(16)))
    assert table.int_mul(8, 16) == pytest.approx(table.int_mul(16, 8))
    assert table.int_add(8) == pytest.approx(0.03) and table.int_add(32) == pytest.approx(0.1)
    assert table.fp32_mac() == pytest.approx(4.6)
    assert table.memory(64, dram=True) == pytest.approx(1300.0) and table.memory(128, dram=False) == pytest.approx(20.0)
    assert "Horowitz" in table.source
