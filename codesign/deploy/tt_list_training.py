"""The TT loop with every layer step as call lists on a board's tt1 and tt2 IPs (paper 003: the step on the PL).

:class:`IpShell` runs a list (:class:`~codesign.contracts.calls.Call`) on the
overlay's tt1 or tt2 IPs (:class:`codesign.deploy.list_shell.ListShell`):
one start and one done per list, the arena in one device buffer per size.
:class:`TtListBoardTrainer` is :class:`codesign.loops.tt_lists.TtListTrainer`
on that shell, with the set-up design.json records, so a board trains with
numpy and pynq alone and ends with the golden loop's state bit for bit.

Data stay in place: each built set of lists runs in its own device buffer,
written and flushed whole once; on every step the host flushes only the words
it writes (the input and core codes, the output gradient) and invalidates
only those it reads (the output, the input and core gradients, the records
whose sums move the scales).
"""

from __future__ import annotations

from codesign.deploy.list_shell import ListOnBoard, ListShell
from codesign.deploy.tt_training import step_hardware
from codesign.loops.tt import TtTrainSetup
from codesign.loops.tt_lists import TtListTrainer
from codesign.step.tt.step_lists import SHARE_PRODUCTS


class IpShell(ListShell):
    """Lists on the overlay's ``tt1`` and ``tt2`` IPs (``spec1``/``spec2``: their builds; ``copies``: how many of
    each, among which a phase's lists are shared, in the manifest's order)."""

    def __init__(self, overlay) -> None:
        hardware = step_hardware(overlay.manifest)
        super().__init__(overlay, {"tt1": hardware.pe1, "tt2": hardware.pe2})
        self.copies = (len(self.ips["tt1"]), len(self.ips["tt2"]))
        self.share_products = SHARE_PRODUCTS  # the fewest products a shared list takes (step_lists.share)
        self.spec1, self.spec2 = hardware.pe1, hardware.pe2


class TtListBoardTrainer(ListOnBoard, TtListTrainer):
    """The design's NumPy TT loop with every layer step as call lists on the overlay's TT IPs."""

    def __init__(self, overlay, design=None, **setup_changes) -> None:
        self.bind(overlay, design)
        setup = self.loop_setup("tt", TtTrainSetup, setup_changes)
        self.shell = IpShell(overlay)
        super().__init__(setup, self.shell)


__all__ = ["IpShell", "TtListBoardTrainer"]
