"""The accelerator driver on the emulated board: golden transactions bit for bit, buffers reused, bad input refused."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.deploy import AccelInputError, AccelTimeout, CodesignOverlay, DeployError
from tests.deploy.conftest import STREAM_PES, golden_transactions

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("pe_name", STREAM_PES)
def test_every_golden_transaction_in_one_call(overlay, pe_name):
    transactions = golden_transactions(pe_name)
    words_in = np.concatenate([words for words, _ in transactions])
    expected = np.concatenate([words for _, words in transactions])
    got = overlay.accelerator(f"{pe_name}_0").run(words_in, expected.size, len(transactions))
    assert got.dtype == np.uint32 and got.shape == expected.shape
    mismatches = np.flatnonzero(got != expected)
    assert mismatches.size == 0, f"{mismatches.size} of {expected.size} words differ, first at {mismatches[:5]}"


@pytest.mark.parametrize("pe_name", STREAM_PES)
def test_one_call_per_transaction_reuses_the_buffers(overlay, pe_name):
    ip = overlay.accelerator(f"{pe_name}_0")
    transactions = golden_transactions(pe_name)
    allocations = None
    for words_in, expected in transactions:
        got = ip.run(words_in, expected.size, 1)
        np.testing.assert_array_equal(got, expected)
        if allocations is None:
            allocations = overlay.device.ddr.allocations, ip.buffer("in", 0).physical_address
    assert (overlay.device.ddr.allocations, ip.buffer("in", 0).physical_address) == allocations
    assert ip.calls == len(transactions)


def test_two_ips_started_side_by_side_then_finished(overlay):
    """start() on two IPs before finish() on either: each answers its own golden words."""
    names = STREAM_PES[:2]
    transactions = {name: golden_transactions(name) for name in names}
    ips = {name: overlay.accelerator(f"{name}_0") for name in names}
    for name in names:
        words_in = np.concatenate([words for words, _ in transactions[name]])
        n_out = sum(words.size for _, words in transactions[name])
        ips[name].start(words_in, n_out, len(transactions[name]))
    for name in names:
        expected = np.concatenate([words for _, words in transactions[name]])
        np.testing.assert_array_equal(ips[name].finish(), expected)
    ip = ips[names[0]]
    with pytest.raises(DeployError, match="finish\\(\\) without a started call"):
        ip.finish()
    words_in, expected = transactions[names[0]][0]
    ip.start(words_in, expected.size, 1)
    with pytest.raises(DeployError, match="was started and not finished"):
        ip.start(words_in, expected.size, 1)
    np.testing.assert_array_equal(ip.finish(), expected)


def test_a_call_written_in_place_into_the_input_buffer(overlay):
    """input_words() then start_filled(): the host writes the words straight into the DMA buffer and the IP
    answers them as it answers start(); neither is allowed while a call is pending, nor a start of more words
    than the buffer was asked for."""
    ip = overlay.accelerator("tt1_0")
    transactions = golden_transactions("tt1")
    words_in = np.concatenate([words for words, _ in transactions])
    expected = np.concatenate([words for _, words in transactions])
    place = ip.input_words(words_in.size)
    assert place.dtype == np.uint32 and place.size == words_in.size
    place[:] = words_in
    ip.start_filled(words_in.size, expected.size, len(transactions))
    with pytest.raises(DeployError, match="was started and not finished"):
        ip.input_words(1)
    np.testing.assert_array_equal(ip.finish(), expected)
    with pytest.raises(DeployError, match=r"without input_words\(\d+\) first"):
        ip.start_filled(ip.buffer("in", 0).size + 1, expected.size, len(transactions))


def test_ips_sit_at_their_manifest_addresses(overlay):
    for ip in overlay.manifest["ips"]:
        driver = overlay.accelerator(ip["name"])
        assert driver.mmio.base_addr == ip["base_address"]
        assert type(driver).bindto == [ip["vlnv"]]
        assert driver.offsets == ip["registers"]


def test_output_buffer_grows_for_a_larger_call(overlay):
    ip = overlay.accelerator("tt1_0")
    transactions = golden_transactions("tt1")
    words_in = np.concatenate([words for words, _ in transactions] * 8)
    expected = np.concatenate([words for _, words in transactions] * 8)
    small = ip.buffer("in", 1).size
    assert words_in.size > small
    np.testing.assert_array_equal(ip.run(words_in, expected.size, 8 * len(transactions)), expected)


@pytest.mark.parametrize("bad", [
    np.zeros(4, dtype=np.int32),
    np.zeros(4, dtype=np.uint64),
    np.zeros((2, 2), dtype=np.uint32),
    [1, 2, 3],
], ids=["int32", "uint64", "2-D", "list"])
def test_wrong_words_are_refused_before_any_register_is_written(overlay, bad):
    ip = overlay.accelerator("tt1_0")
    emulated = overlay.device.ips["tt1_0"]
    before = emulated.words.copy()
    with pytest.raises(AccelInputError, match="1-D numpy uint32"):
        ip.run(bad, 2, 1)
    np.testing.assert_array_equal(emulated.words, before)
    assert emulated.runs == 0


@pytest.mark.parametrize("n_out, n_transactions, match", [
    (-1, 1, "n_out"), (1.5, 1, "n_out"), (True, 1, "n_out"), (1 << 32, 1, "n_out"), (2, 0, "n_transactions"),
])
def test_wrong_counts_are_refused(overlay, n_out, n_transactions, match):
    with pytest.raises(AccelInputError, match=match):
        overlay.accelerator("tt1_0").run(np.zeros(3, dtype=np.uint32), n_out, n_transactions)
    assert overlay.device.ips["tt1_0"].runs == 0


def test_a_kernel_that_never_finishes_times_out_and_stays_busy(stream_folder):
    from codesign.deploy import EmulatedBoard

    device = EmulatedBoard(stream_folder, stalled=["tt1_0"]).activate()
    overlay = CodesignOverlay(stream_folder, device=device)
    ip = overlay.accelerator("tt1_0")
    words_in, expected = golden_transactions("tt1")[0]
    with pytest.raises(AccelTimeout, match=r"tt1_0: ap_done did not rise within 0.2 s .*ap_idle=0"):
        ip.run(words_in, expected.size, 1, timeout_s=0.2)
    with pytest.raises(DeployError, match="busy"):
        ip.run(words_in, expected.size, 1)
    # the other IP is unaffected
    csb_in, csb_out = golden_transactions("csb")[0]
    np.testing.assert_array_equal(overlay.accelerator("csb_0").run(csb_in, csb_out.size, 1), csb_out)


@pytest.mark.parametrize("cut, reported", [(-3, "is read while empty"), (+3, "contains leftover data")],
                         ids=["too-few-words", "too-many-words"])
def test_a_call_the_hardware_would_never_finish_times_out_with_the_reason(stream_folder, cut, reported):
    from codesign.deploy import EmulatedBoard
    from codesign.deploy.emulated import EmulatedStall

    device = EmulatedBoard(stream_folder).activate()
    ip = CodesignOverlay(stream_folder, device=device).accelerator("tt1_0")
    words_in, expected = golden_transactions("tt1")[0]
    words = words_in[:cut] if cut < 0 else np.concatenate([words_in, np.zeros(cut, dtype=np.uint32)])
    with pytest.warns(EmulatedStall, match=reported), \
            pytest.raises(AccelTimeout, match=f"tt1_0: ap_done will not rise .*{reported}.*never raises ap_done"):
        ip.run(words, expected.size, 1, timeout_s=5.0)  # known at once: no wait for the time-out


def test_a_call_flushes_and_reads_back_only_the_words_it_uses(overlay):
    """Cache maintenance covers the call's n_in input and n_out output words, not the (larger) buffers; 5 register
    writes set the call up and one starts it."""
    ip = overlay.accelerator("tt1_0")
    transactions = golden_transactions("tt1")
    ip.run(*_one(transactions[0]))  # the buffers exist now, larger than this call needs
    ip.buffer("in", 4 * sum(words.size for words, _ in transactions))
    traffic = overlay.device.traffic
    traffic.clear()
    words_in, expected = transactions[0]
    np.testing.assert_array_equal(ip.run(words_in, expected.size, 1), expected)
    assert traffic.flushed_bytes == 4 * (words_in.size + expected.size)
    assert traffic.invalidated_bytes == 4 * expected.size
    assert traffic.register_writes == 2 * 2 + 3 + 1


def _one(transaction):
    words_in, expected = transaction
    return words_in, expected.size, 1
