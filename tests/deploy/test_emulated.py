"""The emulated board: DDR model, non-coherent buffers, the s_axilite register semantics, the memory map."""

from __future__ import annotations

import numpy as np
import pytest
from pynq import MMIO, allocate

from codesign.deploy import DdrModel, EmulatedBoard, EmulationError
from codesign.deploy.emulated import PAGE_BYTES, EmulatedStall
from codesign.shell.ip import CTRL_BITS
from tests.deploy.conftest import golden_transactions

CTRL = {name: 1 << bit for name, bit in CTRL_BITS.items()}


def test_ddr_first_fit_page_aligned_and_freed():
    ddr = DdrModel(base=0x1000_0000, size=4 * PAGE_BYTES)
    a, _ = ddr.allocate(10)
    b, _ = ddr.allocate(PAGE_BYTES + 1)
    assert (a, b) == (0x1000_0000, 0x1000_0000 + PAGE_BYTES)
    with pytest.raises(MemoryError):
        ddr.allocate(2 * PAGE_BYTES)
    ddr.return_pointer(a)
    assert ddr.allocate(PAGE_BYTES)[0] == a
    with pytest.raises(EmulationError, match="not inside one allocated buffer"):
        ddr.bytes_at(b + 2 * PAGE_BYTES - 4, 8)
    with pytest.raises(EmulationError, match="aligned"):
        ddr.words_at(b + 2, 1)


@pytest.fixture(scope="module")
def board(stream_folder):
    return EmulatedBoard(stream_folder).activate()


def test_buffers_are_not_coherent(board):
    buffer = allocate(shape=(16,), dtype=np.uint32, target=board)
    assert buffer.physical_address >= board.ddr.base and not buffer.coherent
    buffer[:] = np.arange(16, dtype=np.uint32)
    ddr = board.ddr.words_at(buffer.physical_address, 16)
    assert not ddr.any(), "a write reaches DDR only on flush"
    buffer.flush()
    np.testing.assert_array_equal(ddr, np.arange(16))
    ddr[3] = 99
    assert buffer[3] == 3, "a DDR write reaches the CPU view only on invalidate"
    buffer.invalidate()
    assert buffer[3] == 99


def test_freed_buffers_return_their_memory(board):
    before = board.ddr.allocations
    buffer = allocate(shape=(100,), dtype=np.uint32, target=board)
    assert board.ddr.allocations == before + 1
    del buffer
    assert board.ddr.allocations == before


def _start(mmio, regs, in_buffer, out_buffer, n_in, n_out, n_transactions):
    for name, buffer in (("in", in_buffer), ("out", out_buffer)):
        mmio.write(regs[name], buffer.physical_address & 0xFFFF_FFFF)
        mmio.write(regs[name] + 4, buffer.physical_address >> 32)
    for name, value in (("n_in", n_in), ("n_out", n_out), ("n_transactions", n_transactions)):
        mmio.write(regs[name], value)
    mmio.write(regs["CTRL"], CTRL["ap_start"])


def test_ap_start_runs_the_generated_kernel_and_ap_done_clears_on_read(board):
    entry = board.manifest["ips"][1]
    assert entry["pe"] == "tt1"
    regs = entry["registers"]
    mmio = MMIO(entry["base_address"], entry["address_range"], device=board)
    assert mmio.read(regs["CTRL"]) == CTRL["ap_idle"]
    words_in, expected = golden_transactions("tt1")[0]
    in_buffer, out_buffer = allocate(shape=(words_in.size,), dtype=np.uint32, target=board), allocate(shape=(64,), dtype=np.uint32, target=board)
    in_buffer[:] = words_in
    in_buffer.flush()
    mmio.write(regs["IER"], 3)
    _start(mmio, regs, in_buffer, out_buffer, words_in.size, expected.size, 1)
    assert mmio.read(regs["ISR"]) == 3  # ap_done and ap_ready events, both enabled
    mmio.write(regs["ISR"], 1)  # toggle on write
    assert mmio.read(regs["ISR"]) == 2
    first = mmio.read(regs["CTRL"])
    assert first == CTRL["ap_done"] | CTRL["ap_idle"]  # ap_start fell; ap_ready only pulsed with ap_done
    assert not mmio.read(regs["CTRL"]) & CTRL["ap_done"], "ap_done clears on read"
    out_buffer.invalidate()
    np.testing.assert_array_equal(out_buffer[:expected.size], expected)
    assert not out_buffer[expected.size:].any(), "nothing is written past n_out"


def test_stale_input_without_flush_is_what_the_kernel_sees(board):
    entry = board.manifest["ips"][1]
    regs = entry["registers"]
    mmio = MMIO(entry["base_address"], entry["address_range"], device=board)
    words_in, expected = golden_transactions("tt1")[0]
    in_buffer, out_buffer = allocate(shape=(words_in.size,), dtype=np.uint32, target=board), allocate(shape=(64,), dtype=np.uint32, target=board)
    in_buffer[:] = words_in  # no flush: DDR still holds zeros
    # a zero header is refused at once, the rest of the words are left in the PE's input FIFO: the PL stalls
    with pytest.warns(EmulatedStall, match="contains leftover data"):
        _start(mmio, regs, in_buffer, out_buffer, words_in.size, expected.size, 1)
    assert not mmio.read(regs["CTRL"]) & (CTRL["ap_done"] | CTRL["ap_idle"])
    assert "tt1_0" in board.stall_reason("tt1_0")
    out_buffer.invalidate()
    assert not np.array_equal(out_buffer[:expected.size], expected)
    board.ips["tt1_0"].reset()


def test_bad_pointers_and_unmodelled_modes_are_clear_errors(board):
    entry = board.manifest["ips"][1]
    regs = entry["registers"]
    mmio = MMIO(entry["base_address"], entry["address_range"], device=board)
    with pytest.raises(EmulationError, match="auto_restart"):
        mmio.write(regs["CTRL"], CTRL["ap_start"] | CTRL["auto_restart"])
    for name in ("in", "out"):
        mmio.write(regs[name], 0x100)
        mmio.write(regs[name] + 4, 0)
    mmio.write(regs["n_in"], 4)
    with pytest.raises(EmulationError, match="not inside one allocated buffer"):
        mmio.write(regs["CTRL"], CTRL["ap_start"])
    board.ips[entry["name"]].reset()


def test_nothing_mapped_outside_the_ips_and_buffers(board):
    with pytest.raises(EmulationError, match="nothing at 0x7f000000"):
        MMIO(0x7F00_0000, 0x1000, device=board)


def test_unknown_stalled_ip_is_refused(stream_folder):
    with pytest.raises(EmulationError, match="nope"):
        EmulatedBoard(stream_folder, stalled=["nope"])


def test_missing_hls_project_is_refused(tmp_path, stream_folder):
    import shutil

    shutil.copy(stream_folder / "design.json", tmp_path / "design.json")
    with pytest.raises(EmulationError, match="no HLS project"):
        EmulatedBoard(tmp_path)


def test_a_stale_hls_project_is_refused(tmp_path, stream_folder):
    import json
    import shutil

    shutil.copytree(stream_folder, tmp_path / "build")
    manifest = json.loads((tmp_path / "build" / "design.json").read_text())
    manifest["ips"][1]["spec"]["max_j"] = 8  # design.json regenerated, hls/tt1_0 not
    (tmp_path / "build" / "design.json").write_text(json.dumps(manifest))
    with pytest.raises(EmulationError, match="IP tt1_0: .* was generated for PE 'tt1'.*regenerate the build folder"):
        EmulatedBoard(tmp_path / "build")


def test_empty_buffers_flush_and_invalidate(board):
    buffer = allocate(shape=(0,), dtype=np.uint32, target=board)
    buffer.flush()
    buffer.invalidate()
    assert buffer.size == 0


def test_a_hand_edited_manifest_is_refused_at_construction(tmp_path, stream_folder):
    import json
    import shutil

    from codesign.deploy import ManifestError

    shutil.copytree(stream_folder, tmp_path / "build")
    path = tmp_path / "build" / "design.json"
    manifest = json.loads(path.read_text())
    manifest["ips"][1]["base_address"] = manifest["ips"][0]["base_address"]  # two IPs at one base
    path.write_text(json.dumps(manifest))
    with pytest.raises(ManifestError) as refused:
        EmulatedBoard(tmp_path / "build")
    assert str(refused.value) == (f"{path}: ips[1] (tt1_0): base_address {manifest['ips'][0]['base_address']:#x} "
                                  "is also IP csb_0's")


@pytest.mark.parametrize("board_name", ["zedboard", "ultra96v2", "kv260"])
def test_contiguous_buffers_come_from_low_ddr_below_every_ip_window(tmp_path, board_name):
    """The emulated CMA pool is the upper half of the low DDR: on a 4 GiB Zynq UltraScale+ (the KV260) DDR above
    2 GiB lies at 0x8_0000_0000 and the PL windows start at 0x8000_0000, so no buffer may be handed out there."""
    import dataclasses

    from codesign.boards import board as board_of
    from codesign.design.build import write_emulation_folder
    from tests.deploy.conftest import stream_design

    design = dataclasses.replace(stream_design(), board=board_of(board_name))
    device = EmulatedBoard(write_emulation_folder(design, tmp_path / board_name))
    low = min(board_of(board_name).ddr_mib << 20, 2 << 30)
    assert (device.ddr.base, device.ddr.size) == (low // 2, low // 2)
    assert all(ip.base >= device.ddr.base + device.ddr.size for ip in device.ips.values())
    buffer = allocate(shape=(1024,), dtype=np.uint32, target=device)
    assert low // 2 <= buffer.physical_address < low
