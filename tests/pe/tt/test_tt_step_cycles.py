"""The cycle model of a TT layer step (codesign.pe.tt.step_cycles): sums of the per-transaction models, the paper's
network, the Markdown table. The check against RTL cycles is in tests/rtl/test_tt_rtl.py."""

from __future__ import annotations

import pytest

from codesign.pe.tt.contract import header_word
from codesign.pe.tt.cycles import pe1_cycles, pe2_cycles
from codesign.pe.tt.schedule import LayerGeometry, StepHardware, plan_step
from codesign.pe.tt.step_cycles import (GOAL_SECONDS, PAPER_BATCH, comparison_table, paper_comparison, paper_plans,
                                        step_cycles)


def test_step_cycles_add_the_transaction_models_of_every_call():
    plan = plan_step(LayerGeometry(in_modes=(3, 5, 17), out_modes=(7, 2, 3), ranks=(1, 2, 3, 1), batch=33))
    cycles = step_cycles(plan)
    hw = StepHardware()
    by_hand = 0
    for call in plan.calls:
        model = pe1_cycles if call.pe == "tt1" else pe2_cycles
        by_hand += model(hw.spec(call.pe), header_word(*call.dims)).total
    assert cycles.total == by_hand == sum(cycles.per_pe().values())
    headers = 2 * len(plan.calls)  # every call is accepted: header in, status out
    assert cycles.total == headers + sum(cycles.sum_of(phase) for phase in ("load", "compute", "drain"))
    for c in cycles.contractions:  # overlap cannot beat either stream, nor lose to doing one thing at a time
        assert max(c.words_in, c.words_out, c.compute) <= c.overlapped <= c.cycles
    assert [c.name for c in cycles.contractions] == [c.name for c in plan.contractions]
    assert sum(c.calls for c in cycles.contractions) == len(plan.calls)
    assert cycles.macs == 3 * sum(33 * p * r * a * n * m * c for p, r, a, n, m, c in (
        (1, 5 * 17, 1, 3, 7, 2), (7, 17, 2, 5, 2, 3), (14, 1, 3, 17, 3, 1)))  # each phase: B P R r n m r'


def test_one_pe2_call_by_hand():
    # forward[0] of a (4, 4) -> (2, 5) rank-1 layer, batch 3, batch last: PE2 with I = P = 1, J = r n = 4,
    # K = R B = 4 * 3 = 12, L = m r = 2
    plan = plan_step(LayerGeometry(in_modes=(4, 4), out_modes=(2, 5), ranks=(1, 1, 1), batch=3))
    first = step_cycles(plan).contractions[0]
    assert (first.name, first.pe, first.calls) == ("forward[0]", "tt2", 1)
    assert plan.calls[0].dims == (1, 4, 12, 2)
    # 2 + L*JC*CWB + I*(J*KC*CWA + G*KC*(J+2) + L*(KC+K)), 16 lanes of 16-bit A (8 words), 4-bit B (2 words)
    assert first.cycles == 2 + 2 * 1 * 2 + 1 * (4 * 1 * 8 + 1 * 1 * 6 + 2 * (1 + 12))


def test_paper_network_first_layer_has_no_input_gradient():
    first, second = paper_plans(8)
    assert "input_grad[0]" not in [c.name for c in first.contractions]
    assert "input_grad[0]" in [c.name for c in second.contractions]
    assert first.geometry.batch == second.geometry.batch == PAPER_BATCH


def test_paper_comparison_seconds_and_goal():
    row = paper_comparison(4, dsp={"tt1": 128, "tt2": 128, "tt3": 16})
    assert row.seconds == pytest.approx(row.cycles / 100e6)
    assert row.dsp_total == 272
    assert row.meets_goal == (row.seconds <= GOAL_SECONDS)
    assert paper_comparison(4).meets_goal is None  # no DSP count, no verdict
    bigger = paper_comparison(8)
    assert bigger.cycles > row.cycles and bigger.macs > row.macs
    table = comparison_table([row, bigger])
    assert table.count("\n") == 9 and "272" in table and "not measured" in table
    for r in (row, bigger):
        assert r.stream_seconds <= r.overlapped_seconds <= r.seconds
        assert sum(r.phases.values()) < r.cycles  # headers and status words are the rest
    assert f"{bigger.stream_seconds:.4f}" in table and f"{bigger.overlapped_seconds:.4f}" in table


def test_paper_comparison_dict_is_complete():
    payload = paper_comparison(4, dsp={"tt1": 1, "tt2": 2, "tt3": 3}).to_dict()
    for key in ("cycles", "seconds", "dsp_total", "paper_seconds", "paper_dsp", "goal_seconds", "goal_dsp",
                "meets_goal", "layer_cycles", "mac_utilisation", "phases", "words_in", "words_out", "overlapped_seconds",
                "stream_seconds"):
        assert key in payload
