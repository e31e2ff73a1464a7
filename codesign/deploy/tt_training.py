"""TT training on the board: the golden TT loop of :mod:`codesign.train.hw_golden_tt` with its contractions on the IPs.

:class:`IpRunner` is a runner of :func:`codesign.pe.tt.step.pe_step` (and of
:func:`codesign.train.hw_golden_tt.pe_forward`) that sends every PE call to
the design's tt1 or tt2 IP through its driver (:meth:`AccelIP.run`): the
calls of one contraction, all on the same PE, go in one IP call as that
many transactions (docs/tt_pe.md: header word, cached operand, streamed
operand; status word and results back). A refused transaction (status not
0) or a short answer is an error naming the IP. The schedule already cut
every contraction to the builds' buffers and capped each call's summed
length so that no accumulator saturates, so the IP's sums are the golden
kernels' exact integers.

:class:`BoardTtTrainer` is :class:`~codesign.train.hw_golden_tt.TtHwTrainer`
on an :class:`IpRunner`: the host does the loss, the prior, Adam and the rank
bookkeeping, the PL the contractions; ``load_weights``, ``read_weights``,
``train_step``, ``fit``, ``predict`` and ``throughput`` are the golden loop's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from codesign.deploy.board import OnBoard
from codesign.deploy.driver import AccelIP
from codesign.deploy.manifest import DeployError
from codesign.pe.tt import golden
from codesign.pe.tt.contract import STATUS_BAD_HEADER, STATUS_OK, STATUS_TOO_LARGE
from codesign.pe.tt.cycles import transaction_cycles
from codesign.pe.tt.schedule import StepHardware
from codesign.pe.tt.step_csim import result_shape
from codesign.train.hw_golden_tt import TtHwTrainer, design_hardware

STATUS_NAMES = {STATUS_OK: "ok", STATUS_BAD_HEADER: "bad header", STATUS_TOO_LARGE: "too large"}


class IpRunner:
    """PE calls on the IPs ``drivers`` (PE name -> driver), built as ``hardware`` says.

    Counts IP calls, transactions, input and output words, and the PEs'
    clock cycles by the RTL cycle model (:func:`codesign.pe.tt.cycles.transaction_cycles`:
    the PE's stream only, without the shell's DDR transfers).
    """

    name = "ip"

    def __init__(self, drivers: Mapping[str, AccelIP], hardware: StepHardware) -> None:
        for pe, driver in drivers.items():
            if pe not in ("tt1", "tt2", "tt3"):
                raise DeployError(f"IpRunner runs the TT PEs tt1, tt2, tt3; got an IP for {pe!r}")
            if getattr(driver, "pe", pe) != pe:
                raise DeployError(f"IP {driver.ip_name} is a {driver.pe} PE, not {pe}")
        self.drivers, self.hardware = dict(drivers), hardware
        self.ip_calls, self.transactions, self.words_in, self.words_out, self.pe_cycles = 0, 0, 0, 0, 0

    def run(self, hardware: StepHardware, calls: Sequence[tuple[str, np.ndarray, np.ndarray]]) -> list[np.ndarray]:
        if hardware != self.hardware:
            raise DeployError("the PE calls were planned for other PE builds than the overlay's IPs")
        results: list[np.ndarray] = []
        start = 0
        while start < len(calls):  # consecutive calls on one PE go in one IP call
            pe = calls[start][0]
            stop = start
            while stop < len(calls) and calls[stop][0] == pe:
                stop += 1
            results += self._run_pe(pe, calls[start:stop])
            start = stop
        return results

    def _run_pe(self, pe: str, calls: Sequence[tuple[str, np.ndarray, np.ndarray]]) -> list[np.ndarray]:
        driver = self.drivers.get(pe)
        if driver is None:
            raise DeployError(f"the schedule calls {pe}, and the overlay has no {pe} IP")
        spec = self.hardware.spec(pe)
        streams = [golden.words(spec, a, b) for _, a, b in calls]
        shapes = [result_shape(pe, a, b) for _, a, b in calls]
        n_out = sum(1 + int(np.prod(shape)) for shape in shapes)
        words_in = np.concatenate(streams).astype(np.uint32)
        out = driver.run(words_in, n_out, len(calls))
        self.ip_calls += 1
        self.transactions += len(calls)
        self.words_in += words_in.size
        self.words_out += n_out
        self.pe_cycles += sum(transaction_cycles(spec, int(stream[0])).total for stream in streams)
        results, position = [], 0
        for shape in shapes:
            status = int(out[position])
            if status != STATUS_OK:
                raise DeployError(f"IP {driver.ip_name} refused a {shape} transaction: status {status} "
                                  f"({STATUS_NAMES.get(status, 'unknown')})")
            size = int(np.prod(shape))
            values = out[position + 1:position + 1 + size].astype(np.int64)
            if values.size != size:
                raise DeployError(f"IP {driver.ip_name} answered {values.size} of {size} result words")
            results.append(np.where(values >= 1 << 31, values - (1 << 32), values).reshape(shape))
            position += 1 + size
        return results


class BoardTtTrainer(OnBoard, TtHwTrainer):
    """The design point's TT training loop with every contraction on the overlay's tt1 and tt2 IPs.

    ``BoardTtTrainer(overlay, design)`` takes the design's tt1, tt2 (and
    tt3) instances as the IPs of the same name, the hardware from their
    specs, and trains ``design.training`` (``dataset`` defaults to the
    configuration's). The overlay must implement the design point.
    """

    def __init__(self, overlay, design, **kwargs) -> None:
        self.bind(overlay, design)
        hardware = design_hardware(design)
        drivers = {instance.pe: overlay.accelerator(instance.name) for instance in design.instances
                   if instance.pe in ("tt1", "tt2", "tt3")}
        super().__init__(design.training, hardware=hardware, runner=IpRunner(drivers, hardware), **kwargs)

    @property
    def ip_runner(self) -> IpRunner:
        return self.backend.runner.runner

    def throughput(self) -> dict[str, float]:
        """The loop's figures plus the IPs' (:meth:`OnBoard.ip_figures`) and the words moved."""
        runner = self.ip_runner
        return {**super().throughput(), **self.ip_figures(runner.drivers.values(), runner.pe_cycles),
                "words_in": runner.words_in, "words_out": runner.words_out}


__all__ = ["BoardTtTrainer", "IpRunner"]
