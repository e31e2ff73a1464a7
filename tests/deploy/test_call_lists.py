"""Call lists through the PYNQ driver on the emulated board: the generated C++ in list mode, bit for bit against
the golden list model over the whole arena, eight register writes a list, bad lists refused before any write."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pynq import allocate

from codesign.contracts.calls import RECORD_DONE, Block, Call
from codesign.deploy import AccelInputError, DeployError
from codesign.deploy.driver import flush_words, invalidate_words, read_records
from codesign.pe import get_pe
from codesign.pe.tt.contract import header_word
from codesign.shell.calls import ListCase, tt_chain
from tests.deploy.conftest import golden_transactions

pytestmark = pytest.mark.slow


def _buffers(overlay, case):
    arena = allocate(shape=(case.arena.size,), dtype=np.uint32, target=overlay.device)
    descriptors = allocate(shape=(case.descriptors.size,), dtype=np.uint32, target=overlay.device)
    arena[:], descriptors[:] = case.arena, case.descriptors
    flush_words(arena, arena.size)
    flush_words(descriptors, descriptors.size)
    return arena, descriptors


@pytest.mark.parametrize("seed, shift", [(1, -4), (2, -1), (3, 0), (4, -9)])
def test_a_list_runs_in_place_and_equals_the_golden_arena(overlay, seed, shift):
    pe = get_pe("tt1")
    case = tt_chain(pe, pe.spec_class(), np.random.default_rng(seed), shift=shift)
    ip = overlay.accelerator("tt1_0")
    arena, descriptors = _buffers(overlay, case)
    traffic = overlay.device.traffic
    traffic.clear()
    assert ip.run_list(arena, descriptors, len(case.calls)) == len(case.calls)
    # eight register writes; the descriptors and the cleared end of the last record flushed by the driver, the
    # last record read back, nothing else
    assert traffic.register_writes == 8 and traffic.flushed_bytes == 128 * len(case.calls) + 4
    assert traffic.invalidated_bytes == 4 * 8
    invalidate_words(arena, arena.size)
    wrong = np.flatnonzero(np.asarray(arena) != case.expected)
    assert wrong.size == 0, f"{wrong.size} of {arena.size} arena words differ, first at {wrong[:5]}"
    records = read_records(arena, [call.record for call in case.calls])
    assert [r["done"] for r in records] == [RECORD_DONE] * 2 and [r["status"] for r in records] == [0, 0]
    # a direct call afterwards is a direct call again (n_calls cleared first)
    words_in, expected = golden_transactions("tt1")[0]
    np.testing.assert_array_equal(ip.run(words_in, expected.size, 1), expected)



def test_a_started_list_is_finished_before_the_ip_takes_another(overlay):
    """start_list returns at once (several IPs may run side by side); the IP takes no other call or list until
    finish_list, which gives the calls run; finish_list without a started list is refused."""
    pe = get_pe("tt1")
    case = tt_chain(pe, pe.spec_class(), np.random.default_rng(6))
    ip = overlay.accelerator("tt1_0")
    arena, descriptors = _buffers(overlay, case)
    with pytest.raises(DeployError, match="finish_list\\(\\) without a started list"):
        ip.finish_list()
    ip.start_list(arena, descriptors, len(case.calls))
    with pytest.raises(DeployError, match="call finish_list\\(\\) first"):
        ip.start_list(arena, descriptors, len(case.calls))
    words_in, expected = golden_transactions("tt1")[0]
    with pytest.raises(DeployError, match="call finish_list\\(\\) first"):
        ip.run(words_in, expected.size, 1)
    assert ip.finish_list() == len(case.calls)
    invalidate_words(arena, arena.size)
    assert np.array_equal(np.asarray(arena), case.expected)


def test_a_list_rewrites_only_the_registers_that_changed(overlay):
    """The argument registers keep their values: the same list again writes ap_start only; after a direct call
    (which points ``in`` and ``out`` elsewhere and clears ``n_calls``) the list writes back the words that changed, and still
    computes the golden arena."""
    pe = get_pe("tt1")
    case = tt_chain(pe, pe.spec_class(), np.random.default_rng(8))
    ip = overlay.accelerator("tt1_0")
    arena, descriptors = _buffers(overlay, case)
    traffic = overlay.device.traffic
    ip.run_list(arena, descriptors, len(case.calls))
    arena[:] = case.arena
    flush_words(arena, arena.size)
    traffic.clear()
    ip.run_list(arena, descriptors, len(case.calls))
    assert traffic.register_writes == 1
    words_in, expected = golden_transactions("tt1")[0]
    np.testing.assert_array_equal(ip.run(words_in, expected.size, 1), expected)
    arena[:] = case.arena
    flush_words(arena, arena.size)
    traffic.clear()
    ip.run_list(arena, descriptors, len(case.calls))
    # in and out (their low words: each high word still holds the 0 of every address below 4 GiB), n_calls, ap_start
    assert traffic.register_writes == 1 + 1 + 1 + 1
    invalidate_words(arena, arena.size)
    assert np.array_equal(np.asarray(arena), case.expected)

def test_a_list_past_its_arena_is_refused_before_any_register_is_written(overlay):
    pe = get_pe("tt1")
    case = tt_chain(pe, pe.spec_class(), np.random.default_rng(5))
    arena, descriptors = _buffers(overlay, case)
    small = allocate(shape=(16,), dtype=np.uint32, target=overlay.device)
    traffic = overlay.device.traffic
    traffic.clear()
    with pytest.raises(AccelInputError, match="past the"):
        overlay.accelerator("tt1_0").run_list(small, descriptors, len(case.calls))
    with pytest.raises(AccelInputError, match="descriptors given"):
        overlay.accelerator("tt1_0").run_list(arena, descriptors, 3)
    assert traffic.register_writes == 0




def test_an_ip_without_the_accumulation_buffer_refuses_chains_before_any_register_is_written(overlay):
    """A manifest entry with held_sums false (the IP's shell built without the buffer): the driver refuses a list
    with accumulating calls, and runs one without them."""
    from codesign.shell.calls import chain_list

    pe = get_pe("tt1")
    case = chain_list(pe, pe.spec_class(), np.random.default_rng(9), min_values=300)
    arena, descriptors = _buffers(overlay, case)
    ip = overlay.accelerator("tt1_0")
    traffic = overlay.device.traffic
    traffic.clear()
    ip.held_sums = False  # what the manifest's held_sums false sets
    try:
        with pytest.raises(AccelInputError, match="call 0 accumulates, but this shell has no accumulation buffer"):
            ip.run_list(arena, descriptors, len(case.calls))
        assert traffic.register_writes == 0
        plain = tt_chain(pe, pe.spec_class(), np.random.default_rng(5))
        arena, descriptors = _buffers(overlay, plain)
        assert ip.run_list(arena, descriptors, len(plain.calls)) == len(plain.calls)
    finally:
        ip.held_sums = True


@pytest.mark.parametrize("three", [False, True])
def test_chains_and_3d_blocks_run_on_the_emulated_board(overlay, three):
    """A list of accumulating chains (raw and rounded drains, plain calls inside them) and 3-D blocks (planes
    stacked and interleaved), with two or three segments a call, through the driver on the emulated board, which
    runs the generated C++: the whole arena equal to the golden arena, eight register writes."""
    from codesign.shell.calls import chain_list

    pe = get_pe("tt1")
    case = chain_list(pe, pe.spec_class(), np.random.default_rng(9 + three), min_values=2000, three=three)
    assert any(call.acc_hold for call in case.calls) and any(call.out.planes > 1 for call in case.calls)
    assert all(len(call.segments) == 2 + three for call in case.calls)
    arena, descriptors = _buffers(overlay, case)
    traffic = overlay.device.traffic
    traffic.clear()
    assert overlay.accelerator("tt1_0").run_list(arena, descriptors, len(case.calls)) == len(case.calls)
    assert traffic.register_writes == 8
    invalidate_words(arena, arena.size)
    wrong = np.flatnonzero(np.asarray(arena) != case.expected)
    assert wrong.size == 0, f"{wrong.size} of {arena.size} arena words differ, first at {wrong[:5]}"


def test_chains_and_3d_blocks_pass_on_an_rtl_route_board(overlay):
    """The RTL shell runs 3-D blocks and accumulating calls (tests/shell/test_calls.py, test_rtl_chain_list_*): on a
    board (a device that does not run the generated C++) an RTL-route IP checks a chain and a 3-D list as any, and
    writes no register while checking."""
    import dataclasses

    pe = get_pe("tt1")
    case = tt_chain(pe, pe.spec_class(), np.random.default_rng(6))
    first, second = case.calls
    planes = Block(offset=first.segments[1].offset, words=1, rows=2, stride=8, planes=2, plane_stride=32)
    assert planes.planes == 2
    ip = overlay.accelerator("tt1_0")
    traffic, route = overlay.device.traffic, ip.manifest_entry.get("ip_route")
    overlay.device.runs_generated_cpp, ip.manifest_entry["ip_route"] = False, "rtl"  # what a board says
    try:
        drain = dataclasses.replace(second, out=Block(offset=second.out.offset, words=2 * second.count, rows=1),
                                    acc_add=True)
        chain = ListCase(calls=(dataclasses.replace(second, out=Block(), acc_hold=True), drain), arena=case.arena,
                         expected=case.expected)
        arena, descriptors = _buffers(overlay, chain)
        traffic.clear()
        checked = ip._checked_list(arena, descriptors, 2)
        assert [(call.acc_hold, call.acc_add) for call in checked] == [(True, False), (False, True)]
        assert traffic.register_writes == 0
        three_d = ListCase(calls=(dataclasses.replace(first, segments=(first.segments[0], planes)), second),
                           arena=case.arena, expected=case.expected)
        arena, descriptors = _buffers(overlay, three_d)
        assert len(ip._checked_list(arena, descriptors, 2)) == 2
    finally:
        del overlay.device.runs_generated_cpp
        ip.manifest_entry.pop("ip_route") if route is None else ip.manifest_entry.__setitem__("ip_route", route)


def test_a_refused_call_stops_the_list_and_the_driver_names_it(overlay):
    """A call the PE refuses (J above max_j) between two good ones: the list ends after its record, and
    run_list raises naming it; the IP is then reloaded."""
    pe = get_pe("tt1")
    case = tt_chain(pe, pe.spec_class(), np.random.default_rng(6))
    first, second = case.calls
    refused = Call(header=header_word(1, pe.spec_class().max_j + 1, 1, 1), segments=(), out=Block(), count=0,
                   record=second.record)
    bad = ListCase(calls=(first, refused, second), arena=case.arena, expected=case.arena)
    arena, descriptors = _buffers(overlay, bad)
    with pytest.raises(DeployError, match="call 1 of the list was refused \\(status 2\\)"):
        overlay.accelerator("tt1_0").run_list(arena, descriptors, 3)
    overlay.download()  # the PE may hold part of a transaction: reset the PL


def test_a_list_that_stops_is_not_taken_for_done_by_an_earlier_lists_record(overlay):
    """The good list runs first and leaves its last call's record done; the same slots then end a list whose
    middle call is refused (its record in a slot of its own): the list stops before its last call, whose slot
    still holds the earlier record, and the driver must not take that for this list's end."""
    pe = get_pe("tt1")
    case = tt_chain(pe, pe.spec_class(), np.random.default_rng(8))
    first, second = case.calls
    spare = 4 * case.arena.size  # a record slot past the case's arena
    arena_words = np.concatenate([case.arena, np.zeros(16, np.uint32)])
    refused = Call(header=header_word(1, pe.spec_class().max_j + 1, 1, 1), segments=(), out=Block(), count=0,
                   record=spare)
    ip = overlay.accelerator("tt1_0")
    good = ListCase(calls=(first, second), arena=arena_words, expected=arena_words)
    arena, descriptors = _buffers(overlay, good)
    assert ip.run_list(arena, descriptors, 2) == 2
    assert read_records(arena, [second.record])[0]["done"] == RECORD_DONE
    bad = ListCase(calls=(first, refused, second), arena=arena_words, expected=arena_words)
    descriptors = allocate(shape=(bad.descriptors.size,), dtype=np.uint32, target=overlay.device)
    descriptors[:] = bad.descriptors
    flush_words(descriptors, descriptors.size)
    with pytest.raises(DeployError, match="call 1 of the list was refused \\(status 2\\)"):
        ip.run_list(arena, descriptors, 3)
    overlay.download()  # the PE may hold part of a transaction: reset the PL


def test_descriptors_inside_the_arena_are_refused(overlay):
    pe = get_pe("tt1")
    case = tt_chain(pe, pe.spec_class(), np.random.default_rng(7))
    arena, _ = _buffers(overlay, case)
    with pytest.raises(AccelInputError, match="inside the arena"):
        overlay.accelerator("tt1_0").run_list(arena, arena[16:], 1)


def test_a_tt_layer_forward_runs_as_two_lists_on_the_emulated_board(tmp_path):
    """digits_tt's design on the emulated board: the PE2 list then the PE1 list on one arena, the layer output
    read back alone; 16 register writes for the whole forward pass."""
    import warnings

    from codesign.deploy import CodesignOverlay
    from codesign.design import load_design
    from codesign.design.build import write_emulation_folder
    from codesign.shell.calls import run_list_golden
    from codesign.step.tt.lists import forward_lists
    from tests.step.tt.test_lists import SHIFTS, _layer, _reference

    design = load_design(Path(__file__).resolve().parents[2] / "examples" / "digits_tt.toml")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        overlay = CodesignOverlay(write_emulation_folder(design, tmp_path / "board"), design=design, emulate=True)
    ips = {name: overlay.accelerators(name)[0] for name in ("tt2", "tt1")}
    spec2, spec1 = (get_pe(name).spec_class(**ips[name].manifest_entry["spec"]) for name in ("tt2", "tt1"))
    x, cores = _layer(seed=2)
    lists = forward_lists(x, cores, SHIFTS, spec2=spec2, spec1=spec1)
    arena = allocate(shape=(lists.arena.size,), dtype=np.uint32, target=overlay.device)
    arena[:] = lists.arena
    lists2 = [allocate(shape=(32 * len(calls),), dtype=np.uint32, target=overlay.device)
              for calls in (lists.pe2_calls, lists.pe1_calls)]
    for buffer, calls in zip(lists2, (lists.pe2_calls, lists.pe1_calls)):
        buffer[:] = np.concatenate([call.descriptor() for call in calls])
        flush_words(buffer, buffer.size)
    flush_words(arena, arena.size)
    traffic = overlay.device.traffic
    traffic.clear()
    ips["tt2"].run_list(arena, lists2[0], len(lists.pe2_calls))
    ips["tt1"].run_list(arena, lists2[1], len(lists.pe1_calls))
    outputs = int(np.prod(lists.out_shape))
    invalidate_words(arena, outputs, lists.out // 4)
    calls = len(lists.pe2_calls) + len(lists.pe1_calls)
    assert traffic.as_dict() == {"flushed_bytes": 128 * calls + 2 * 4, "invalidated_bytes": 4 * (outputs + 2 * 8),
                                 "register_writes": 16, "register_reads": traffic.register_reads}
    y = np.asarray(arena[lists.out // 4:lists.out // 4 + outputs]).view(np.int32).reshape(lists.out_shape)
    np.testing.assert_array_equal(y, _reference(x, cores, SHIFTS))  # 8-bit states in the 16-bit PEs' slots
    golden = run_list_golden(get_pe("tt1"), spec1, run_list_golden(get_pe("tt2"), spec2, lists.arena,
                                                                   lists.pe2_calls), lists.pe1_calls)
    invalidate_words(arena, arena.size)
    assert np.array_equal(np.asarray(arena), golden)


def test_a_board_refuses_lists_on_the_hls_export(overlay):
    """The Vitis HLS export's list mode runs in C simulation only: on a board (a device that does not run the
    generated C++) a design built on the HLS route refuses run_list before any register is written."""
    pe = get_pe("tt1")
    case = tt_chain(pe, pe.spec_class(), np.random.default_rng(8))
    arena, descriptors = _buffers(overlay, case)
    overlay.device.runs_generated_cpp = False  # what a board's device says
    try:
        overlay.device.traffic.clear()
        with pytest.raises(AccelInputError, match="Vitis HLS export"):
            overlay.accelerator("tt1_0").run_list(arena, descriptors, 2)
        assert overlay.device.traffic.register_writes == 0
    finally:
        del overlay.device.runs_generated_cpp
