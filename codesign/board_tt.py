"""TT training on a board from a desktop-class host: the golden TT loop of :mod:`codesign.train.hw_golden_tt`
with its contractions on the overlay's IPs (:class:`codesign.deploy.tt_training.IpRunner`).

The host side of this loop (softmax loss, low-rank prior, Adam, rank pruning) is the torch trainer's, so a run
ends bit-identical to ``codesign train``; it needs torch and sits above the board runtime, so it runs where
torch runs (a desktop driving the emulated board, or a board image with a torch wheel). A board without torch
trains with the NumPy loop instead (:class:`codesign.deploy.tt_training.TtBoardTrainer`).
"""

from __future__ import annotations

from codesign.deploy.board import OnBoard
from codesign.deploy.driver import AccelIP
from codesign.deploy.tt_training import IpRunner
from codesign.train.hw_golden_tt import TtHwTrainer, design_hardware


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
        drivers: dict[str, list[AccelIP]] = {}
        for instance in design.instances:
            if instance.pe in ("tt1", "tt2", "tt3"):
                drivers.setdefault(instance.pe, []).append(overlay.accelerator(instance.name))
        super().__init__(design.training, hardware=hardware, runner=IpRunner(drivers, hardware), **kwargs)

    @property
    def ip_runner(self) -> IpRunner:
        return self.backend.runner.runner

    def throughput(self) -> dict[str, float]:
        """The loop's figures plus the IPs' (:meth:`OnBoard.ip_figures`) and the words moved."""
        runner = self.ip_runner
        drivers = [driver for copies in runner.drivers.values() for driver in copies]
        return {**super().throughput(), **self.ip_figures(drivers, runner.pe_cycles, runner.stages),
                "pe_makespan": runner.pe_makespan, "words_in": runner.words_in, "words_out": runner.words_out}


__all__ = ["BoardTtTrainer"]
