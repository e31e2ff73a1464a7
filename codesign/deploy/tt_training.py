"""The TT PEs' calls on a board's IPs: a runner of the TT layer step whose contractions go to tt1/tt2 IPs.

:class:`IpRunner` is a runner of :func:`codesign.step.tt.step.pe_step` (and of
:func:`codesign.train.hw_golden_tt.pe_forward`) that sends every PE call to
the design's tt1 or tt2 IP through its driver (:meth:`AccelIP.run`): the
calls of one contraction, all on the same PE, go in one IP call as that
many transactions (docs/tt_pe.md: header word, cached operand, streamed
operand; status word and results back). A refused transaction (status not
0) or a short answer is an error naming the IP. The schedule already cut
every contraction to the builds' buffers and capped each call's summed
length so that no accumulator saturates, so the IP's sums are the golden
kernels' exact integers.

:class:`TtBoardTrainer` is the NumPy TT loop (:mod:`codesign.loops.tt`: loss,
low-rank prior, Adam, rank pruning on the host) on an :class:`IpRunner`, so a
board trains TT layers with numpy and pynq alone. A desktop can instead drive
the IPs from the torch trainer (:class:`codesign.board_tt.BoardTtTrainer`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Dict, List, Optional

import numpy as np

from codesign.deploy.board import OnBoard
from codesign.deploy.driver import AccelIP
from codesign.deploy.manifest import DeployError
from codesign.step.model import StageLog, busiest_port
from codesign.loops.tt import TtMlpTrainer, TtTrainSetup
from codesign.step.tt.runners import AnswerError, pack_stage, stage_layout, unpack_results
from codesign.step.tt.schedule import StepHardware, hardware_of


class IpRunner:
    """PE calls on the IPs ``drivers`` (PE name -> its copies' drivers, or one driver), built as ``hardware`` says.

    One :meth:`run` is one stage of a step (``pe_step`` hands over the core
    and input gradients of a core together): each PE's calls are split over
    its copies by :func:`codesign.step.tt.schedule.assign_calls` on their
    modelled cycles (:func:`codesign.step.tt.runners.stage_layout`, worked out
    once per distinct stage), every copy gets its share as one IP call whose
    words are packed straight into the IP's DMA buffer, all copies are
    started and then all are waited for, so PE1 and PE2 copies work side by
    side. Counts IP calls, transactions, input and output words, the PEs'
    clock cycles by the RTL cycle model (:mod:`codesign.pe.tt.cycles`:
    the PE's stream only, without the shell's DDR transfers) added over
    every call, and the same cycles as the copies overlap them
    (``pe_makespan``: per stage, the busiest copy). ``hp_ports`` maps an IP's
    name to the high-performance port its data go through (design.json's
    ``hp_port``; an IP not named: port 0), so the stage log has the busiest
    port's words beside the total.
    """

    name = "ip"

    def __init__(self, drivers: Mapping[str, AccelIP | Sequence[AccelIP]], hardware: StepHardware,
                 hp_ports: Optional[Mapping[str, int]] = None) -> None:
        self.hp_ports = dict(hp_ports or {})
        self.drivers: dict[str, list[AccelIP]] = {}
        for pe, given in drivers.items():
            copies = [given] if isinstance(given, AccelIP) else list(given)
            if pe not in ("tt1", "tt2", "tt3"):
                raise DeployError(f"IpRunner runs the TT PEs tt1, tt2, tt3; got an IP for {pe!r}")
            for driver in copies:
                if getattr(driver, "pe", pe) != pe:
                    raise DeployError(f"IP {driver.ip_name} is a {driver.pe} PE, not {pe}")
            if len(copies) != hardware.units(pe):
                raise DeployError(f"the hardware has {hardware.units(pe)} {pe} copies, and {len(copies)} {pe} IPs "
                                  "were given")
            self.drivers[pe] = copies
        self.hardware = hardware
        self.ip_calls, self.transactions, self.words_in, self.words_out = 0, 0, 0, 0
        self.pe_cycles, self.pe_makespan = 0, 0
        self.stages = StageLog()  # one stage per run: the copies side by side

    def run(self, hardware: StepHardware, calls: Sequence[tuple[str, np.ndarray, np.ndarray]]) -> list[np.ndarray]:
        if hardware != self.hardware:
            raise DeployError("the PE calls were planned for other PE builds than the overlay's IPs")
        for pe in dict.fromkeys(pe for pe, _, _ in calls):
            if not self.drivers.get(pe):
                raise DeployError(f"the schedule calls {pe}, and the overlay has no {pe} IP")
        layout = stage_layout(self.hardware, calls)
        jobs = [(self.drivers[copy.pe][copy.unit], copy) for copy in layout.copies]
        self._fill(jobs, calls, layout)
        results: list[np.ndarray | None] = [None] * len(calls)
        for driver, copy, out in self._start_and_finish(jobs):
            for position, result in zip(copy.positions, self._results(driver, [calls[p] for p in copy.positions],
                                                                        out)):
                results[position] = result
        return results  # type: ignore[return-value]

    def _fill(self, jobs, calls, layout) -> None:
        """Every call's input words written straight into its copy's DMA buffer (:func:`pack_stage`)."""
        pack_stage(self.hardware, calls, layout, [driver.input_words(copy.words_in) for driver, copy in jobs])

    def _start_and_finish(self, jobs):
        """Start every job's IP call, then wait for each; every started IP is waited for before an error leaves."""
        started, error = [], None
        for driver, copy in jobs:
            try:
                driver.start_filled(copy.words_in, copy.words_out, len(copy.positions))
            except DeployError as failure:
                error = failure
                break
            started.append((driver, copy))
            self.ip_calls += 1
            self.transactions += len(copy.positions)
            self.words_in += copy.words_in
            self.words_out += copy.words_out
        finished, busiest = [], 0
        for driver, copy in started:
            try:
                out = driver.finish()
            except DeployError as failure:
                error = error or failure
                continue
            self.pe_cycles += copy.cycles
            busiest = max(busiest, copy.cycles)
            finished.append((driver, copy, out))
        self.pe_makespan += busiest
        if error is not None:
            raise error
        self.stages.add(busiest, sum(copy.words_in for _, copy in started),
                        sum(copy.words_out for _, copy in started),
                        *busiest_port([(copy.words_in, copy.words_out) for _, copy in started],
                                      [self.hp_ports.get(driver.ip_name, 0) for driver, _ in started]))
        return finished

    def _results(self, driver: AccelIP, calls, out: np.ndarray) -> list[np.ndarray]:
        try:
            return unpack_results(self.hardware, calls, out)
        except AnswerError as error:
            raise DeployError(f"IP {driver.ip_name} {error}") from None


def step_hardware(manifest: Mapping) -> StepHardware:
    """The PE builds of design.json's TT IPs (:func:`codesign.step.tt.schedule.hardware_of`)."""
    try:
        return hardware_of([(ip["name"], ip["pe"], ip["spec"]) for ip in manifest["ips"]], design=manifest["design"])
    except (ValueError, TypeError) as error:
        raise DeployError(f"design {manifest['design']!r}: {error}") from None


class TtBoardTrainer(OnBoard, TtMlpTrainer):
    """The design's NumPy TT loop (:mod:`codesign.loops.tt`) with every contraction on the overlay's TT IPs.

    ``TtBoardTrainer(overlay)`` takes the set-up design.json records
    (``loop``), with ``setup_changes`` (epochs, batch size...) applied as on
    the golden run, and every copy of tt1 and tt2 (and the tt3, which the
    dense route calls) as an IP; ``design``, a
    design point, is checked against the overlay first (a desktop's guard).
    The host (loss, prior, Adam, pruning) is NumPy, so this runs on a board
    image as it is, and ends with the golden loop's weights bit for bit.
    """

    def __init__(self, overlay, design=None, **setup_changes) -> None:
        self.bind(overlay, design)
        setup = self.loop_setup("tt", TtTrainSetup, setup_changes)
        drivers: Dict[str, List[AccelIP]] = {}
        for ip in overlay.manifest["ips"]:
            if ip["pe"] in ("tt1", "tt2", "tt3"):
                drivers.setdefault(ip["pe"], []).append(overlay.accelerator(ip["name"]))
        hardware = dataclasses.replace(step_hardware(overlay.manifest), forward_split=setup.forward_split)
        self.ip_runner = IpRunner(drivers, hardware,
                                  {ip["name"]: ip.get("hp_port", 0) for ip in overlay.manifest["ips"]})
        super().__init__(setup, runner=self.ip_runner)
        if self.hardware != self.ip_runner.hardware:
            raise DeployError(f"design {overlay.manifest['design']!r}: the loop set-up's TT builds (loop.setup.ips) "
                              "are not the IPs' (ips)")

    @property
    def stage_log(self) -> StageLog:
        return self.ip_runner.stages

    def throughput(self) -> Dict[str, Any]:
        """The loop's figures plus the IPs' (:meth:`OnBoard.ip_figures`) and the words moved."""
        runner = self.ip_runner
        drivers = [driver for copies in runner.drivers.values() for driver in copies]
        return {**super().throughput(), **self.ip_figures(drivers, runner.pe_cycles, runner.stages),
                "pe_makespan": runner.pe_makespan, "words_in": runner.words_in, "words_out": runner.words_out}


__all__ = ["IpRunner", "TtBoardTrainer", "step_hardware"]
