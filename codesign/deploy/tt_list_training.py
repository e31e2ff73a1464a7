"""The TT loop with every layer step as call lists on a board's tt1 and tt2 IPs (paper 003: the step on the PL).

:class:`IpShell` runs a list (:class:`~codesign.contracts.calls.Call`) on the
overlay's tt1 or tt2 IPs (:class:`codesign.deploy.list_shell.ListShell`):
one start and one done per list, the arena in one device buffer per size.
:class:`TtListBoardTrainer` is :class:`codesign.loops.tt_lists.TtListTrainer`
on that shell, with the set-up design.json records, so a board trains with
numpy and pynq alone and ends with the golden loop's state bit for bit. The TT family's
record (:data:`FAMILY`) sits here: :func:`tt_board_trainer` chooses this trainer or the per-call one.

Data stay in place: each built set of lists runs in its own device buffer,
written and flushed whole once; on every step the host flushes only the words
it writes (the input and core codes, the output gradient) and invalidates
only those it reads (the output, the input and core gradients, the records
whose sums move the scales).
"""

from __future__ import annotations

from codesign.deploy.list_shell import ListOnBoard, ListShell, runs_lists
from codesign.deploy.families import BoardFamily
from codesign.deploy.manifest import setup_from_manifest
from codesign.deploy.tt_training import TtBoardTrainer, step_hardware
from codesign.loops.tt import TtMlpTrainer, TtTrainSetup
from codesign.loops.tt_lists import TtListTrainer
from codesign.step.tt.step_lists import SHARE_PRODUCTS, check_specs


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


def _measure_host(setup: TtTrainSetup, *, source: str, data=None):
    from codesign.loops.host_share import measure_tt_host

    return measure_tt_host(setup, source=source)


def tt_board_trainer(overlay, design=None, **setup_changes):
    """The TT family's board trainer for ``overlay``: every step as call lists
    (:class:`codesign.deploy.tt_list_training.TtListBoardTrainer`, the state and the rounding on the PL) where the
    set-up rounds at tracked scales on the direct core-gradient route, the builds take lists and the IPs run them
    (:func:`codesign.deploy.list_shell.runs_lists`); else :class:`TtBoardTrainer`, one IP call per contraction."""
    setup = setup_from_manifest(overlay.manifest, TtTrainSetup, setup_changes)
    precision, hardware = setup.precision, step_hardware(overlay.manifest)
    tracked = precision.get("scale_rule") == "tracked" and precision.get("core_grad_route", "direct") == "direct"
    try:
        check_specs(hardware.pe1, hardware.pe2)
    except ValueError:
        tracked = False
    if tracked and runs_lists(overlay, "tt1") and runs_lists(overlay, "tt2"):
        return TtListBoardTrainer(overlay, design, **setup_changes)
    return TtBoardTrainer(overlay, design, **setup_changes)


# a short run of the whole path: two epochs, the prior's warm-up and a rank pruning after the first epoch at a
# threshold that prunes
FAMILY = BoardFamily(key="tt", board=tt_board_trainer, golden=TtMlpTrainer, setup=TtTrainSetup,
                     state_keys=("cores", "biases", "moments", "trackers", "means", "ranks"), example="digits_tt.toml",
                     quick_changes={"epochs": 2, "warmup_epochs": 1, "prune_from_epoch": 0, "threshold": 0.9},
                     measure_host=_measure_host)


__all__ = ["FAMILY", "IpShell", "TtListBoardTrainer", "tt_board_trainer"]
