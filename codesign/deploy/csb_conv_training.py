"""The CSB conv family on a board: a conv network's compressed training (residual blocks included) with every
fixed-point step as call lists on the overlay's csb IP, or shared among its copies.

:class:`CsbConvListBoardTrainer` is :class:`codesign.loops.csb_conv_lists.CsbConvListTrainer` on a
:class:`~codesign.deploy.list_shell.ListShell` over the overlay's csb IP, with the set-up design.json records, so
a board trains with numpy and pynq alone and ends with the golden conv loop's state bit for bit. The float warm-up
and the pruning search run on the ARM; the pruning event writes the kept kernels into the arena once; per
fixed-point step the host flushes the batch's and the loss gradient's codes, reads the logits' sums and starts
two lists (on several csb IPs, up to five phases of lists side by side). There is no per-call route: a conv step runs
as lists or not at all.
"""

from __future__ import annotations

from codesign.deploy.families import BoardFamily
from codesign.deploy.list_shell import ListOnBoard, ListShell, runs_lists
from codesign.deploy.manifest import DeployError
from codesign.loops.csb_conv import CsbConvSetup, CsbConvTrainer
from codesign.loops.csb_conv_lists import CsbConvListTrainer
from codesign.step.csb.lists import PE

KEY = "csb_conv"


class CsbConvListBoardTrainer(ListOnBoard, CsbConvListTrainer):
    """The design's compressed conv loop with every fixed-point step as call lists on the overlay's csb IPs."""

    def __init__(self, overlay, design=None, **setup_changes) -> None:
        self.bind(overlay, design)
        setup = self.loop_setup(KEY, CsbConvSetup, setup_changes)
        self.shell = ListShell(overlay, {PE: setup.spec})
        super().__init__(setup, self.shell)


def csb_conv_board_trainer(overlay, design=None, **setup_changes) -> CsbConvListBoardTrainer:
    """The conv family's board trainer for ``overlay``; refused, before anything runs, where its csb IP does not
    run call lists (an HLS export without the list sequencer)."""
    if not runs_lists(overlay, PE):
        raise DeployError(f"design {overlay.manifest.get('design')!r}: its csb IP does not run call lists, and a conv "
                          "network trains on the PE only as lists (rebuild it on the RTL route)")
    return CsbConvListBoardTrainer(overlay, design, **setup_changes)


def _measure_host(setup: CsbConvSetup, *, source: str, data=None):
    raise DeployError("a conv loop runs as call lists only: time its host share on the IPs "
                      "(python -m codesign.deploy.host_share TARGET --lists)")


# a short run of the whole path: the float warm-up, the pruning search and the fixed-point phase in two epochs,
# at a constant rate (a cosine over two short epochs would reach 0)
FAMILY = BoardFamily(key=KEY, board=csb_conv_board_trainer, golden=CsbConvTrainer, setup=CsbConvSetup,
                     state_keys=("buffers", "masks"), example="digits_compressed_conv.toml",
                     quick_changes={"epochs": 2, "warmup_epochs": 1, "schedule": "constant"},
                     measure_host=_measure_host)

__all__ = ["FAMILY", "CsbConvListBoardTrainer", "csb_conv_board_trainer"]
