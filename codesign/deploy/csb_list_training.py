"""The CSB loop with every fixed-point step as call lists on a board's csb IPs: the state stays on the device.

:class:`CsbListBoardTrainer` is :class:`codesign.loops.csb_lists.CsbListTrainer` on a
:class:`~codesign.deploy.list_shell.ListShell` over the overlay's csb IP (or its copies, which share each phase's
lists), with the set-up design.json records, so
a board trains with numpy and pynq alone and ends with the golden loop's state bit for bit. The float warm-up and
the pruning search run on the ARM; the pruning event encodes the kept structure into the arena once; per
fixed-point step the host flushes the batch's and the loss gradient's codes, reads the logits' accumulators and
starts two lists (on copies, three phases of lists).
"""

from __future__ import annotations

from codesign.deploy.list_shell import ListOnBoard, ListShell
from codesign.loops.csb import CsbTrainSetup
from codesign.loops.csb_lists import CsbListTrainer
from codesign.step.csb.lists import PE


class CsbListBoardTrainer(ListOnBoard, CsbListTrainer):
    """The design's compressed loop with every fixed-point step as call lists on the overlay's csb IPs."""

    def __init__(self, overlay, design=None, **setup_changes) -> None:
        self.bind(overlay, design)
        setup = self.loop_setup(PE, CsbTrainSetup, setup_changes)
        self.shell = ListShell(overlay, {PE: setup.spec})
        super().__init__(setup, self.shell)


__all__ = ["CsbListBoardTrainer"]
