"""The emulated board's watchdog (codesign.deploy.kernel_worker): a kernel that hangs or crashes is killed and
named, the board's process survives it, and DDR is shared with the worker both ways."""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import time
import warnings

import numpy as np
import pytest

from codesign.deploy.kernel_worker import KernelFailed, KernelWorker, SharedDdr
from tests.deploy.conftest import golden_transactions

LIBC = ctypes.CDLL(None)


def _write_words(address, count, value):
    """A kernel (run in the worker): ``count`` words of ``value`` at ``address``, and a line on standard output."""
    ctypes.memmove(address, np.full(count, value, np.uint32).ctypes.data, 4 * count)
    LIBC.printf(b"wrote %d words\n", ctypes.c_int(count))


def _sum_into(source, target, count):
    """A kernel: the sum of ``count`` words at ``source`` written as one word at ``target``."""
    words = np.ctypeslib.as_array((ctypes.c_uint32 * count).from_address(source))
    ctypes.c_uint32.from_address(target).value = int(words.sum())


def _hang():
    while True:
        time.sleep(1)


def _crash():
    os.kill(os.getpid(), signal.SIGSEGV)


@pytest.fixture
def worker():
    ddr = SharedDdr(1 << 20)
    kernels = KernelWorker({"write": _write_words, "sum": _sum_into, "hang": _hang, "crash": _crash}, ddr,
                           timeout_s=1.0)
    yield kernels
    kernels.close()


def test_the_worker_writes_the_boards_ddr_and_its_output_is_captured(worker):
    words = worker.ddr.bytes[4096:4096 + 64].view(np.uint32)
    printed = worker.call("write", [words, 16, 0xDEADBEEF])
    assert printed == "wrote 16 words\n"
    assert (words == 0xDEADBEEF).all()
    private = np.arange(10, dtype=np.uint32)  # not in the shared DDR: sent by value
    worker.call("sum", [private, words[:1], 10])
    assert int(words[0]) == 45 and worker.starts == 1


@pytest.mark.parametrize("kernel, message", [("hang", r"did not return within 1 s; its worker process was killed"),
                                             ("crash", r"crashed: .*killed by signal 11 \(SIGSEGV\)")])
def test_a_hung_or_crashed_kernel_is_named_and_the_next_call_gets_a_new_worker(worker, kernel, message):
    started = time.monotonic()
    pid = None
    worker.call("write", [worker.ddr.bytes[:4].view(np.uint32), 1, 7])
    pid = worker.pid
    with pytest.raises(KernelFailed, match=message):
        worker.call(kernel, [])
    assert time.monotonic() - started < 5
    assert worker.pid is None
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reaped: no zombie left
    words = worker.ddr.bytes[:8].view(np.uint32)
    worker.call("write", [words, 2, 9])
    assert list(words) == [9, 9] and worker.starts == 2


def test_closing_ends_the_worker(worker):
    worker.call("write", [worker.ddr.bytes[:4].view(np.uint32), 1, 1])
    pid = worker.pid
    worker.close()
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    with pytest.raises(ValueError, match="timeout_s"):
        KernelWorker({}, worker.ddr, timeout_s=0)


def _faulty_copy(stream_folder, tmp_path):
    """The build folder with tt1_0's generated top function made to spin forever when n_transactions is 1000, and
    to write through a null pointer when it is 1001."""
    folder = tmp_path / "faulty"
    shutil.copytree(stream_folder, folder)
    top = folder / "hls" / "tt1_0" / "tt1_0_accel.cpp"
    text = top.read_text()
    call = re.search(r"\n(\s*)codesign::accel::run_shell<", text)
    fault = ("\n  if (n_transactions == 1000) { volatile int spin = 1; while (spin) {} }"
             "\n  if (n_transactions == 1001) { *(volatile uint32_t *)0 = 1; }")
    top.write_text(text[:call.start()] + fault + text[call.start():])
    return folder


@pytest.mark.parametrize("transactions, reason", [(1000, r"did not return within 1 s"),
                                                  (1001, r"crashed: .*SIGSEGV")], ids=["hangs", "crashes"])
def test_a_generated_kernel_that_hangs_or_crashes_is_cut_and_the_board_lives_on(stream_folder, tmp_path,
                                                                               transactions, reason):
    from codesign.deploy import AccelTimeout, CodesignOverlay, EmulatedBoard
    from codesign.deploy.emulated import EmulatedStall

    folder = _faulty_copy(stream_folder, tmp_path)
    device = EmulatedBoard(folder, kernel_timeout_s=1.0).activate()
    overlay = CodesignOverlay(folder, device=device)
    ip = overlay.accelerator("tt1_0")
    words_in, expected = golden_transactions("tt1")[0]
    started = time.monotonic()
    with pytest.warns(EmulatedStall, match=reason), \
            pytest.raises(AccelTimeout, match=f"tt1_0: ap_done will not rise .*{reason}.*a list|n_transactions"):
        ip.run(words_in, expected.size, transactions, timeout_s=30.0)
    assert time.monotonic() - started < 10, "named within 10 s"
    # the other IP still runs, bit-exact, and so does this one after the PL is reloaded
    csb_in, csb_out = golden_transactions("csb")[0]
    np.testing.assert_array_equal(overlay.accelerator("csb_0").run(csb_in, csb_out.size, 1), csb_out)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        overlay.download()
    np.testing.assert_array_equal(overlay.accelerator("tt1_0").run(words_in, expected.size, 1), expected)
