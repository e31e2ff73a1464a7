"""The host's share of a step as the step-time models price it (codesign.step.host)."""

from __future__ import annotations

import pytest

from codesign.step.host import HostModel, spans


def test_the_fit_goes_through_both_schedules():
    # 10 ms at 100 calls, 6 ms at 20 calls: 4 ms over 80 calls = 50 us a call, and 6 - 1 = 5 ms fixed
    host = HostModel.fit((0.010, 100), (0.006, 20), source="here")
    assert host.per_call_s == pytest.approx(50e-6) and host.fixed_s == pytest.approx(0.005)
    assert host.seconds(100) == pytest.approx(0.010) and host.seconds(20) == pytest.approx(0.006)
    assert HostModel.fit((0.004, 30), (0.003, 30), source="here") == HostModel(fixed_s=0.003, per_call_s=0.0,
                                                                              source="here")
    # more calls measured faster (noise): no negative per-call time
    assert HostModel.fit((0.002, 100), (0.003, 20), source="here").per_call_s == 0.0


def test_spans_cut_a_length_into_pieces_of_at_most_step():
    assert spans(10, 4) == [4, 4, 2] and spans(8, 4) == [4, 4] and spans(3, 8) == [3] and spans(0, 4) == []
