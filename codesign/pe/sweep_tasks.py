"""Sweep tasks over the registered PEs: one (PE configuration, board) point each, for :mod:`codesign.sweep`.

They look a PE up by name in the registry (:func:`codesign.pe.get_pe`), so they
sit above the PEs, while the generic estimate they run (:mod:`codesign.hw.estimate`)
takes any PE object.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from codesign.hw import yosys as ys
from codesign.boards import board as board_named
from codesign.hw.estimate import RESOURCES, estimate
from codesign.pe import get_pe


def estimate_task(*, pe: str, board: str, **spec_fields) -> dict:
    """Yosys cost of PE ``pe`` built with ``spec_fields`` (the rest at their defaults) on ``board``'s FPGA.

    A :mod:`codesign.sweep` task: the report entry of that one synthesis
    (cell counts, logic depth, utilisation of that board's budget) plus the
    tool line. The spec and board are checked before Yosys starts.
    """
    target = board_named(board)
    processing_element = get_pe(pe)
    spec = processing_element.spec(**spec_fields)
    with tempfile.TemporaryDirectory(prefix="codesign_estimate_") as tmp:
        report = estimate(processing_element, [spec], out_dir=Path(tmp), families=(target.yosys_family,),
                          progress=False, plot=False)
    entry = report["entries"][0]
    counts = ys.ResourceCounts(**entry["counts"])
    entry.update(board=target.name, part=target.part, budget={key: target.resources[key] for key in RESOURCES},
                 utilisation_percent={key: round(value, 4)
                                      for key, value in counts.utilisation_percent(target.resources).items()},
                 pe=pe, tool=report["tool"])
    return entry
