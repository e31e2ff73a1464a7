"""Run a call list on the shell at its two simulated levels: the RTL under cocotb, the HLS C++ through the bridge.

Both take a :class:`codesign.shell.calls.ListCase` (arena, list, golden arena)
and report the arena words compared and the mismatches; nothing is
tolerated. The emulated board runs the same C++ as :func:`run_list_csim`
through the PYNQ driver (``AccelIP.run_list``).
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from codesign.shell.calls import ListCase

LIST_BENCH_MODULE = "codesign.shell.list_bench"


@dataclass(frozen=True)
class ListResult:
    """One list run at one level: arena words compared, mismatching words, cycles from the ap_start write to the
    CTRL read that saw ap_done (RTL; the bench polls every ``POLL_CYCLES``; -1 where not simulated), register
    writes of the host (RTL), wall seconds, and ``busy_cycles``: cycles from the shell's run_start to its ap_done,
    exact (RTL; -1 where not simulated)."""

    level: str
    words: int
    mismatches: int
    cycles: int
    register_writes: int
    seconds: float
    first_mismatches: tuple = ()
    busy_cycles: int = -1

    @property
    def passed(self) -> bool:
        return self.mismatches == 0


def _write_case(case: ListCase, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, arena=case.arena, expected=case.expected, descriptors=case.descriptors,
             n_calls=np.int64(len(case.calls)))
    return path


def run_list_rtl(pe, spec, case: ListCase, work_dir: Path, *, seed: int = 1, pause: float = 0.0,
                 simulator: str = "icarus", ddr=None, held_sums: bool = True,
                 timeout_cycles: int = 2_000_000) -> ListResult:
    """Simulate ``accel_top`` around ``pe``'s RTL running ``case``'s list once (one start, one done). ``ddr``: a
    :class:`codesign.step.list_cycles.DdrTiming` the memories keep (deterministic DDR latency and bandwidth;
    only with ``pause`` = 0), or None for the AxiRam alone; ``held_sums`` False: the shell without the
    accumulation buffer; ``timeout_cycles``: the cycles the bench waits for ap_done (a longer list fails)."""
    from codesign.hw.rtlsim import build_dir_for
    from codesign.shell.ip import RTL_TOP, run_shell_bench, stream_word_bits

    pe.check_spec(spec)
    if ddr is not None and pause > 0:
        raise ValueError("a DDR timing and random pauses exclude each other")
    build_dir = build_dir_for(Path(work_dir).resolve(), f"{RTL_TOP}_list_{pe.rtl_top}", simulator,
                              {**pe.rtl_parameters(spec), **({} if held_sums else {"HELD": 0})})
    summary_path = build_dir / "list_summary.json"
    case_path = _write_case(case, build_dir / "list_case.npz")
    env = {"ACCEL_LIST": str(case_path), "ACCEL_SUMMARY": str(summary_path), "ACCEL_SEED": str(seed),
           "ACCEL_PAUSE": str(pause), "ACCEL_DATA_BITS": str(stream_word_bits(pe, spec)),
           "ACCEL_DDR": json.dumps(dataclasses.asdict(ddr)) if ddr is not None else "",
           "ACCEL_TIMEOUT_CYCLES": str(int(timeout_cycles))}
    started = time.perf_counter()
    summary = run_shell_bench(pe, spec, build_dir, test_module=LIST_BENCH_MODULE, env=env, summary_path=summary_path,
                              simulator=simulator, required={"words_checked": int, "cycles": int,
                                                             "register_writes": int, "first_mismatches": list,
                                                             "busy_cycles": int}, held_sums=held_sums)
    return ListResult(level="rtl", words=summary["words_checked"], mismatches=summary["mismatches"],
                      cycles=summary["cycles"], register_writes=summary["register_writes"],
                      seconds=time.perf_counter() - started, first_mismatches=tuple(summary["first_mismatches"]),
                      busy_cycles=summary["busy_cycles"])


def run_list_csim(project_dir: Path, case: ListCase, *, build_dir: Path | None = None, stream_bits: int = 32
                  ) -> ListResult:
    """Run ``case``'s list through the HLS shell's top function (g++, the bridge the emulated board uses)."""
    from codesign.hw.bridge import AccelBridge

    bridge = AccelBridge(Path(project_dir), build_dir=build_dir)
    arena = np.array(case.arena, dtype=np.uint32)
    descriptors = np.ascontiguousarray(case.descriptors, dtype=np.uint32)
    started = time.perf_counter()
    bridge.run_list(arena, descriptors, len(case.calls), stream_bits=stream_bits)
    wrong = np.flatnonzero(arena != case.expected)
    first = tuple({"word": int(i), "expected": f"{int(case.expected[i]):08x}", "actual": f"{int(arena[i]):08x}"}
                  for i in wrong[:10])
    return ListResult(level="csim", words=int(arena.size), mismatches=int(wrong.size), cycles=-1,
                      register_writes=-1, seconds=time.perf_counter() - started, first_mismatches=first)
