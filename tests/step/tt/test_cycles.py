"""The cycle model of a TT layer step (codesign.step.tt.cycles): sums of the per-transaction models, the stages
and the list schedule on PE copies. The check against RTL cycles is in tests/pe/tt/test_tt_rtl_cases.py; the
paper's network in tests/reproduce/test_tt_step_paper.py."""

from __future__ import annotations

import dataclasses

import pytest

from codesign.pe.tt.contract import header_word
from codesign.pe.tt.cycles import pe1_cycles, pe2_cycles, transaction_cycles
from codesign.step.tt.schedule import MAX_UNITS, LayerGeometry, StepHardware, assign_calls, plan_step, stages
from codesign.step.tt.cycles import PARALLEL_HARDWARE, call_traffic, list_schedule, stage_loads, step_cycles
from codesign.reproduce.tt_step_paper import paper_plans

GEOMETRY = LayerGeometry(in_modes=(3, 5, 17), out_modes=(7, 2, 3), ranks=(1, 2, 3, 1), batch=33)


def test_step_cycles_add_the_transaction_models_of_every_call():
    plan = plan_step(GEOMETRY)
    cycles = step_cycles(plan)
    hw = StepHardware()
    by_hand = 0
    for call in plan.calls:
        model = pe1_cycles if call.pe == "tt1" else pe2_cycles
        by_hand += model(hw.spec(call.pe), header_word(*call.dims)).total
    assert cycles.total == by_hand == sum(cycles.per_pe().values())
    headers = 2 * len(plan.calls)  # every call is accepted: header in, status out
    assert cycles.total == headers + sum(cycles.sum_of(phase) for phase in ("load", "compute", "drain")
                                        ) - cycles.sum_of("overlap")
    assert {c.pe for c in cycles.contractions if c.overlap} == {"tt1", "tt2"}  # loads beside the MAC loops
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
    # 2 + L*JC*CWB + I*(J*KC*CWA + G*(KC*J+2) + L*K), 16 lanes of 16-bit A (8 words), 4-bit B (2 words)
    assert first.cycles == 2 + 2 * 1 * 2 + 1 * (4 * 1 * 8 + 1 * (1 * 4 + 2) + 2 * 12)


@pytest.mark.parametrize("stream_bits, cycles, stream, words", [
    # 16 lanes of 16-bit A: 256 bits, 8 / 4 / 2 words; of 4-bit B: 64 bits, 2 / 1 / 1 words (a chunk starts a word);
    # the 2 rows of K = 12 results leave in beats of 1 / 2 / 4 after one group read (24 results: no spill)
    (32, 2 + 2 * 1 * 2 + 1 * (4 * 1 * 8 + 1 * (1 * 4 + 2) + 2 * 12), (1 + 2 * 2 + 4 * 8, 1 + 24), (37, 25)),
    (64, 2 + 2 * 1 * 1 + 1 * (4 * 1 * 4 + 1 * (1 * 4 + 2) + 2 * 6), (1 + 2 * 1 + 4 * 4, 1 + 12), (38, 26)),
    (128, 2 + 2 * 1 * 1 + 1 * (4 * 1 * 2 + 1 * (1 * 4 + 2) + 2 * 3), (1 + 2 * 1 + 4 * 2, 1 + 6), (44, 28)),
])
def test_one_pe2_call_by_hand_at_each_stream_width(stream_bits, cycles, stream, words):
    # the call above at a wider stream: fewer load and drain cycles, results packed stream_bits / 32 to a word; the traffic
    # in 32-bit words (bytes / 4) grows where a header, a status or a short chunk pads a wide word
    hardware = StepHardware().at_stream_bits(stream_bits)
    plan = plan_step(LayerGeometry(in_modes=(4, 4), out_modes=(2, 5), ranks=(1, 1, 1), batch=3), hardware=hardware)
    model = step_cycles(plan)
    first = model.contractions[0]
    assert first.cycles == cycles and (first.stream_in, first.stream_out) == stream
    assert (first.words_in, first.words_out) == words and first.bytes == 4 * sum(words)
    assert model.stage_words[0] == words and model.schedule.stage_cycles[0] == cycles
    assert first.overlapped == max(*stream, first.compute)


@pytest.mark.parametrize("stream_bits", [32, 64, 128])
def test_stream_bound_counts_words_at_the_width_and_traffic_counts_bytes(stream_bits):
    hardware = PARALLEL_HARDWARE.at_stream_bits(stream_bits)
    plan = plan_step(GEOMETRY, hardware=hardware)
    model = step_cycles(plan)
    parts = stream_bits // 32
    for c in model.contractions:
        assert (c.words_in, c.words_out) == (c.stream_in * parts, c.stream_out * parts)
    assert model.bytes == 4 * (model.sum_of("words_in") + model.sum_of("words_out"))
    assert model.stream_cycles <= model.overlapped_makespan <= model.makespan
    bound = 0
    for stage in stages(plan):
        per_stream = {}
        for index in stage:
            c = model.contractions[index]
            for key in ("stream_in", "stream_out"):
                per_stream[c.pe, key] = per_stream.get((c.pe, key), 0) + getattr(c, key)
        bound += max(-(-count // hardware.units(pe)) for (pe, _), count in per_stream.items())
    assert model.stream_cycles == bound
    narrow = step_cycles(plan_step(GEOMETRY, hardware=PARALLEL_HARDWARE))
    if stream_bits > 32:  # wider words: fewer load cycles and stream words, never fewer bytes
        assert model.makespan < narrow.makespan and model.stream_cycles < narrow.stream_cycles
        assert model.bytes >= narrow.bytes
    for pe in ("tt1", "tt2"):
        loads = stage_loads(plan, pe)
        assert sum(w_in for _, w_in, _ in loads) == sum(c.words_in for c in model.contractions if c.pe == pe)


def test_step_hardware_at_a_stream_width():
    wide = PARALLEL_HARDWARE.at_stream_bits(128)
    assert all(wide.spec(pe).stream_bits == 128 for pe in ("tt1", "tt2", "tt3"))
    assert wide.units("tt2") == 4 and wide.pe1.rows == 2
    assert wide.describe() == "2 x tt1 16x2 + 4 x tt2 16x2, 128-bit streams"
    assert PARALLEL_HARDWARE.at_stream_bits(32) == PARALLEL_HARDWARE
    with pytest.raises(ValueError, match="stream_bits"):
        PARALLEL_HARDWARE.at_stream_bits(48)


@pytest.mark.parametrize("need_input_grad", [True, False])
def test_stages_pair_each_core_gradient_with_the_input_gradient_of_the_same_core(need_input_grad):
    plan = plan_step(GEOMETRY, need_input_grad=need_input_grad)
    names = [[plan.contractions[i].name for i in stage] for stage in stages(plan)]
    tail = [["core_grad[0]", "input_grad[0]"]] if need_input_grad else [["core_grad[0]"]]
    assert names == [["forward[0]"], ["forward[1]"], ["forward[2]"], ["core_grad[2]", "input_grad[2]"],
                     ["core_grad[1]", "input_grad[1]"], *tail]


def _by_stage_and_pe(plan, values):
    out = []
    for stage in stages(plan):
        per_pe = {}
        for position, call in enumerate(plan.calls):
            if call.index in stage:
                per_pe.setdefault(call.pe, []).append(values[position])
        out.append(per_pe)
    return out


def test_one_copy_of_each_pe_runs_a_stage_in_the_longer_of_its_pe1_and_pe2_work():
    plan = plan_step(GEOMETRY)
    cycles = step_cycles(plan)
    assert set(cycles.schedule.units) == {0}
    calls = [transaction_cycles(plan.hardware.spec(c.pe), header_word(*c.dims)).total for c in plan.calls]
    by_hand = [max(sum(v) for v in per_pe.values()) for per_pe in _by_stage_and_pe(plan, calls)]
    assert list(cycles.schedule.stage_cycles) == by_hand
    assert cycles.makespan == sum(by_hand) < cycles.total  # the paired stages overlap PE1 and PE2


def test_list_schedule_by_hand_on_two_copies():
    hardware = StepHardware(pe1_units=2, pe2_units=2)
    plan = plan_step(LayerGeometry(in_modes=(4, 4), out_modes=(2, 5), ranks=(1, 1, 1), batch=40), hardware=hardware)
    first = [position for position, call in enumerate(plan.calls) if call.index == 0]
    assert len(first) == 3  # forward[0]: K = R B = 160 cut into 64 + 64 + 32
    cycles = [1] * len(plan.calls)
    for position, value in zip(first, (5, 3, 4)):
        cycles[position] = value
    schedule = list_schedule(plan, cycles)
    # 5 -> copy 0; 3 -> copy 1; 4 -> copy 1 (free at 3, copy 0 at 5): copies end at 5 and 7
    assert [schedule.units[p] for p in first] == [0, 1, 1] and schedule.stage_cycles[0] == 7
    with pytest.raises(ValueError, match="call cycle counts"):
        list_schedule(plan, cycles[:-1])


@pytest.mark.parametrize("outer_pe", ["tt1", "tt3"])
def test_port_words_split_each_stage_by_the_ips_ports(outer_pe):
    """Through one port a stage's busiest port moves all its words; with a port per IP, the busiest copy's words
    (each copy's words summed from its calls as the schedule assigns them); in between, no more than one port."""
    geometry = LayerGeometry(in_modes=(4, 8, 8, 4), out_modes=(8, 4, 4, 4), ranks=(1, 8, 8, 8, 1), batch=64)
    hardware = StepHardware(pe1_units=3, pe2_units=2, outer_pe=outer_pe)
    plan = plan_step(geometry, hardware=hardware, core_grad_route="dense")
    one = step_cycles(plan)
    assert one.stage_port_words == one.stage_words
    ips = 3 + 2 + (outer_pe == "tt3")
    each = step_cycles(plan, hp_ports=ips)
    stage_of = {index: number for number, group in enumerate(stages(plan)) for index in group}
    per_copy: dict = {}
    for call, unit in zip(plan.calls, one.schedule.units):
        spec = hardware.spec(call.pe)
        words = per_copy.setdefault((stage_of[call.index], call.pe, unit), [0, 0])
        moved = call_traffic(spec, call.header)
        words[0] += moved[0]
        words[1] += moved[1]
    for number, (w_in, w_out) in enumerate(each.stage_port_words):
        assert w_in == max(w[0] for (s, _, _), w in per_copy.items() if s == number)
        assert w_out == max(w[1] for (s, _, _), w in per_copy.items() if s == number)
    assert any(w < total for (w, _), (total, _) in zip(each.stage_port_words, one.stage_words))
    for ports in (2, 3, 4):
        for (p_in, p_out), (w_in, w_out) in zip(step_cycles(plan, hp_ports=ports).stage_port_words, one.stage_words):
            assert -(-w_in // ports) <= p_in <= w_in and -(-w_out // ports) <= p_out <= w_out
    with pytest.raises(ValueError, match="hp_ports"):
        step_cycles(plan, hp_ports=0)


def test_assign_calls_gives_each_call_to_the_copy_free_first():
    assert assign_calls([5, 3, 4, 2, 2], 2) == [0, 1, 1, 0, 0]  # frees at 5|3 -> 5|7 -> 7|7 -> tie: copy 0
    assert assign_calls([4, 4, 4], 1) == [0, 0, 0] and assign_calls([], 3) == []
    with pytest.raises(ValueError, match="copies"):
        assign_calls([1], 0)


def test_enough_copies_run_every_stage_in_its_longest_call():
    hardware = StepHardware(pe1_units=MAX_UNITS, pe2_units=MAX_UNITS)
    plan = plan_step(LayerGeometry(in_modes=(4, 4), out_modes=(2, 5), ranks=(1, 1, 1), batch=40), hardware=hardware)
    calls = list(range(1, len(plan.calls) + 1))
    per_stage = _by_stage_and_pe(plan, calls)
    assert all(len(v) <= MAX_UNITS for per_pe in per_stage for v in per_pe.values())
    assert list_schedule(plan, calls).stage_cycles == tuple(max(max(v) for v in p.values()) for p in per_stage)


@pytest.mark.parametrize("field", ["pe1_units", "pe2_units"])
@pytest.mark.parametrize("value", [0, MAX_UNITS + 1])
def test_step_hardware_refuses_unit_counts_out_of_range(field, value):
    with pytest.raises(ValueError, match=field):
        StepHardware(**{field: value})


def test_step_hardware_counts_and_names_its_copies():
    assert StepHardware().macs() == 256 and StepHardware().describe() == "1 x tt1 16x8 + 1 x tt2 16x8"
    assert PARALLEL_HARDWARE.macs() == 2 * 32 + 4 * 32
    assert PARALLEL_HARDWARE.describe() == "2 x tt1 16x2 + 4 x tt2 16x2"
    assert PARALLEL_HARDWARE.units("tt3") == 1


SPLIT_PAPER = StepHardware(pe1=dataclasses.replace(StepHardware().pe1, lanes=4, rows=4, stream_bits=64), pe1_units=8,
                           pe2=dataclasses.replace(StepHardware().pe2, lanes=8, rows=4, stream_bits=64), pe2_units=4,
                           outer_pe="tt1", forward_split=True)


@pytest.mark.parametrize("route", ["direct", "dense"])
def test_a_forward_split_puts_idle_pe1_copies_to_work_in_the_forward_stages(route):
    """Paper 003's network at rank 8 on 8 PE1 + 4 PE2 copies: with the split every forward stage runs on both PEs,
    each swapped call is a PE1 transaction the header takes (rows = the call's I·K, one J, PE2's J as its K), and
    the step's makespan is shorter than PE2 alone gives, with the same MACs."""
    from codesign.pe.tt.golden import status
    from codesign.contracts.constants import STATUS_OK
    from codesign.pe.tt.contract import header_dims

    plain = dataclasses.replace(SPLIT_PAPER, forward_split=False)
    for split_plan, plain_plan in zip(paper_plans(8, hardware=SPLIT_PAPER, route=route),
                                      paper_plans(8, hardware=plain, route=route)):
        split_steps, plain_steps = step_cycles(split_plan), step_cycles(plain_plan)
        assert split_steps.makespan < plain_steps.makespan and split_steps.macs == plain_steps.macs
        assert split_steps.total == sum(split_steps.per_pe().values())
        for index, item in enumerate(split_plan.contractions):
            if item.phase != "forward":
                assert split_plan.calls_of(index) == plain_plan.calls_of(index)
                continue
            swapped = [call for call in split_plan.calls_of(index) if call.swapped]
            assert swapped and all(call.pe == "tt1" for call in swapped)
            split = swapped[0].k[0]
            assert split % SPLIT_PAPER.pe2.lanes == 0 or split == item.dims[2]
            assert all(call.k[1] <= split for call in split_plan.calls_of(index) if not call.swapped)
            assert all(call.k[0] >= split for call in swapped)
            for call in swapped:
                i, j, k, l = call.dims
                assert header_dims(call.header, 4) == ((i * k, 1, j, l), True)
                assert status(SPLIT_PAPER.pe1, call.header) == STATUS_OK
    assert plain.describe() + ", forward split" == SPLIT_PAPER.describe()


def test_step_hardware_refuses_a_forward_split_that_is_not_a_bool():
    with pytest.raises(TypeError, match="forward_split must be True or False"):
        StepHardware(forward_split=1)


def test_a_pe1_that_cannot_take_the_forward_codes_gets_no_swapped_call():
    """12-bit cores fit this PE2 (12-bit B) but not PE1's 8-bit B: the split leaves the forward calls on PE2."""
    from codesign.pe.tt.spec import Tt1Spec, Tt2Spec

    hardware = StepHardware(pe1=Tt1Spec(a_bits=16, b_bits=8), pe2=Tt2Spec(a_bits=16, b_bits=12, max_j=128, max_l=64),
                            pe1_units=2, forward_split=True)
    plan = plan_step(LayerGeometry(in_modes=(4, 4), out_modes=(2, 5), ranks=(1, 2, 1), batch=40), core_bits=12,
                     hardware=hardware)
    forward = [call for call in plan.calls if plan.contractions[call.index].phase == "forward"]
    assert forward and all(call.pe == "tt2" and not call.swapped for call in forward)


def test_the_forward_split_takes_the_soonest_makespan_and_the_larger_split_on_a_tie(monkeypatch):
    """Directed: around the even-time estimate the split whose calls finish soonest is taken; where several tie,
    the largest (more of K on PE2); a split of the whole K leaves PE1 nothing."""
    import codesign.step.tt.schedule as schedule

    plan = paper_plans(8, hardware=dataclasses.replace(SPLIT_PAPER, forward_split=False), route="direct")[0]
    index = next(i for i, item in enumerate(plan.contractions) if item.phase == "forward")
    item = plan.contractions[index]
    chosen = schedule.forward_split_point(index, item, SPLIT_PAPER)
    lanes, k = SPLIT_PAPER.pe2.lanes, item.dims[2]
    assert 0 < chosen <= k and (chosen % lanes == 0 or chosen == k)
    tried = []

    def flat(calls, hardware):  # every split ties
        tried.append(max((call.k[1] for call in calls if not call.swapped), default=0))
        return 1000

    monkeypatch.setattr(schedule, "_makespan", flat)
    assert schedule.forward_split_point(index, item, SPLIT_PAPER) == max(tried)  # the larger on a tie
    monkeypatch.setattr(schedule, "_makespan", lambda calls, hardware: sum(call.swapped for call in calls))
    fewest = schedule.forward_split_point(index, item, SPLIT_PAPER)  # fewest PE1 calls: the largest split tried
    assert fewest == max(tried)
    monkeypatch.setattr(schedule, "_makespan", lambda calls, hardware: -sum(call.swapped for call in calls))
    assert schedule.forward_split_point(index, item, SPLIT_PAPER) == min(tried)  # most PE1 calls: the smallest
