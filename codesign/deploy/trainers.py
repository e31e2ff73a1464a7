"""Which board trainer and which golden loop train a design, read from design.json's ``loop`` entry.

A board has design.json and nothing of the desktop, so the family recorded there
(:func:`codesign.design.loops.loop_entry`) picks the trainer: the notebooks of a
bundle and the self-check ask :func:`board_trainer` instead of naming a class.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, NamedTuple, Tuple

from codesign.deploy.csb_training import CsbBoardTrainer
from codesign.deploy.manifest import DeployError
from codesign.deploy.training import BoardTrainer
from codesign.deploy.tt_training import TtBoardTrainer
from codesign.loops.csb import CsbMlpTrainer, CsbTrainSetup
from codesign.loops.fb import FbMlpTrainer, HwTrainSetup
from codesign.loops.tt import TtMlpTrainer, TtTrainSetup


class Family(NamedTuple):
    """A PE family's loop: its board trainer, its golden loop, its set-up, the state words a comparison reads, and
    the shipped example design (``examples/<example>``) that trains with it (benchmarks and demos take it from here)."""

    name: str
    board: type
    golden: type
    setup: type
    state_keys: Tuple[str, ...]
    example: str


FAMILIES: Dict[str, Family] = {
    "fpmac_array": Family("fpmac_array", BoardTrainer, FbMlpTrainer, HwTrainSetup, ("weights", "biases", "velocity"),
                          "digits_abvs.toml"),
    "csb": Family("csb", CsbBoardTrainer, CsbMlpTrainer, CsbTrainSetup, ("buffers", "masks"),
                  "digits_compressed_mlp.toml"),
    "tt": Family("tt", TtBoardTrainer, TtMlpTrainer, TtTrainSetup, ("cores", "biases", "moments", "trackers", "ranks"),
                 "digits_tt.toml"),
}

# Set-up changes for a short run of the whole path (the self-check, a notebook's quick mode): two epochs, with
# the FB rule raising the FB after the first (fpmac_array), or the float warm-up, the pruning search and the
# fixed-point phase (csb, at a constant rate: a cosine over two short epochs would reach 0), or the prior's warm-up
# and a rank pruning after the first epoch at a threshold that prunes (tt, where the design has a prior).
QUICK_CHANGES = {"fpmac_array": {"epochs": 2, "epsilon": 1.0},
                 "csb": {"epochs": 2, "warmup_epochs": 1, "schedule": "constant"},
                 "tt": {"epochs": 2, "warmup_epochs": 1, "prune_from_epoch": 0, "threshold": 0.9}}


def family_of(manifest: Mapping[str, Any]) -> Family:
    """The family of the loop design.json records; a clear error for a design with none this runtime trains."""
    loop = manifest.get("loop")
    family = loop.get("family") if isinstance(loop, Mapping) else None
    if family not in FAMILIES:
        raise DeployError(f"design {manifest.get('design')!r}: design.json records "
                          f"{'no loop' if family is None else f'a {family!r} loop'}; the board runtime trains the "
                          f"{', '.join(FAMILIES)} loops")
    return FAMILIES[family]


def board_trainer(overlay, **setup_changes):
    """The board trainer of ``overlay``'s design, with ``setup_changes`` (epochs, batch size...) applied."""
    return family_of(overlay.manifest).board(overlay, **setup_changes)


def golden_trainer(manifest: Mapping[str, Any], **setup_changes):
    """The golden loop of the design in ``manifest``, with the same changes: what a board run is compared with."""
    family = family_of(manifest)
    return family.golden(family.setup.from_dict({**manifest["loop"]["setup"], **setup_changes}))
