"""The FB-float loop with every step as call lists on a board's fpmac_array IPs: the state stays on the device.

:class:`FbListBoardTrainer` is :class:`codesign.loops.fb_lists.FbListTrainer`
on a :class:`~codesign.deploy.list_shell.ListShell` over the overlay's
fpmac_array IP (or its copies, which share each phase's lists), with the set-up design.json records, so a board trains with
numpy and pynq alone and ends with the golden loop's state bit for bit. Per
step the host flushes the batch, three scalars and the loss gradient, reads
the logits, and starts two lists (on copies, three phases of lists).
"""

from __future__ import annotations

from codesign.deploy.list_shell import ListOnBoard, ListShell
from codesign.loops.fb import HwTrainSetup
from codesign.loops.fb_lists import FbListTrainer
from codesign.step.fpmac_array.lists import PE


class FbListBoardTrainer(ListOnBoard, FbListTrainer):
    """The design's FB-float loop with every step as call lists on the overlay's fpmac_array IPs."""

    def __init__(self, overlay, design=None, **setup_changes) -> None:
        self.bind(overlay, design)
        setup = self.loop_setup(PE, HwTrainSetup, setup_changes)
        self.shell = ListShell(overlay, {PE: setup.spec})
        super().__init__(setup, self.shell)


__all__ = ["FbListBoardTrainer"]
