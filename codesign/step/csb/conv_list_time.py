"""What a compressed conv network's step as call lists costs the PL: the list cycle model over its phases.

The conv analogue of :mod:`codesign.step.csb.list_time`: the lists of :mod:`codesign.step.csb.conv_step` (every
map in place, halo tiles read as 3-D blocks, stride-2 convs at stride 2, ReLU, masks, UPD and SHR on the PE)
counted cycle by cycle by :func:`codesign.step.list_cycles.step_cycles` (units: clock cycles of the IP). Scales
and UPD shifts are header and descriptor fields, not lengths, so a step is priced at zero scales.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from codesign.boards import Board
from codesign.pe.csb.format import CSBMatrix
from codesign.pe.csb.spec import CsbSpec
from codesign.step.csb.conv_net import resnet_shapes
from codesign.step.csb.conv_step import conv_structures, net_arena, net_lists
from codesign.step.csb.lists import PE, CsbStepScales
from codesign.step.share import phased_step_cycles
from codesign.step.csb.time import csb_mac_energy_pj
from codesign.step.list_cycles import DdrTiming
from codesign.step.time import StepTime, list_step_time

Convs = Sequence[Tuple[int, int]]


def conv_step_macs(spec: CsbSpec, image: Tuple[int, int, int], convs: Convs, classes: int, batch: int,
                   masks: Sequence[np.ndarray], blocks: Convs = ()) -> Dict[str, int]:
    """The step's useful MACs (``macs``: FP, WG and, past the first layer, EB over the kept kernels; the head's and
    projections' weights as 1 x 1 kernels; an identity shortcut's constant products are not counted) and
    ``dense_macs`` (the same were nothing pruned); ``blocks`` the residual blocks after the convs."""
    shapes, _ = resnet_shapes(spec, image, convs, blocks, classes)
    useful = dense = 0
    for index, (shape, mask) in enumerate(zip(shapes, masks)):
        taps = shape.kernel ** 2
        positions = batch * shape.out_map[0] * shape.out_map[1] * (2 + (index > 0))
        useful += int(np.count_nonzero(mask)) * taps * positions
        dense += shape.channels * shape.outputs * taps * positions
    return {"macs": useful, "dense_macs": dense}


def conv_step_list_cycles(spec: CsbSpec, image: Tuple[int, int, int], convs: Convs, classes: int, batch: int,
                          structures: Sequence[CSBMatrix], *, ddr: Optional[DdrTiming] = None, fast: bool = False,
                          copies: int = 1, blocks: Convs = ()) -> Dict[str, object]:
    """Cycles of one full-batch step of the network on ``copies`` IPs of ``spec`` with the stored ``structures``
    (:func:`~codesign.step.csb.conv_step.conv_structures`), phase by phase as
    :func:`codesign.step.share.phased_step_cycles` gives them; ``ddr`` the list bench's DDR model (None: the AXI
    RAM alone); ``fast`` re-prices a simulated list shape by its compute cycles (for the explorer)."""
    shapes, found = resnet_shapes(spec, image, convs, blocks, classes)
    net = net_arena(spec, shapes, batch, structures, found)
    layers = len(shapes)
    zero = CsbStepScales(relu=(0,) * (layers - 1), mask=(0,) * layers, upd=((0, False),) * layers)
    lists = net_lists(net, batch, zero, 0, copies)
    return phased_step_cycles(PE, spec, lists, net.image, ddr=ddr, fast=fast)


def conv_list_step(spec: CsbSpec, image: Tuple[int, int, int], convs: Convs, classes: int, batch: int,
                   masks: Sequence[np.ndarray], board: Board, *, clock_mhz: float, host_s: float, host_source: str,
                   ddr: Optional[DdrTiming] = None, fast: bool = False, copies: int = 1,
                   priced: Optional[Dict[str, object]] = None, beside: Optional[Dict[int, float]] = None,
                   hp_ports: int = 1, blocks: Convs = ()) -> StepTime:
    """The whole fixed-point list step of the network with the kept kernels ``masks`` on ``copies`` IPs of the
    ``spec`` build on ``board`` at ``clock_mhz``: a stage a phase (``priced``: their cycles as
    :func:`conv_step_list_cycles` gave them, else priced here), the host's ``host_s`` measured where it runs, of
    which ``beside`` (stage index -> seconds) ran while that stage's lists computed; the IPs over ``hp_ports``
    high-performance ports; ``blocks`` the residual blocks after the convs."""
    if priced is None:
        shapes, _ = resnet_shapes(spec, image, convs, blocks, classes)
        priced = conv_step_list_cycles(spec, image, convs, classes, batch, conv_structures(spec, masks, shapes),
                                       ddr=ddr, fast=fast, copies=copies, blocks=blocks)
    counts = conv_step_macs(spec, image, convs, classes, batch, masks, blocks)
    return list_step_time({**priced, "macs": counts["macs"]}, board, clock_mhz=clock_mhz, host_s=host_s,
                          host_source=host_source, array_macs=copies * spec.batch * spec.parallel,
                          mac_energy_pj=csb_mac_energy_pj(spec), dense_macs=counts["dense_macs"], beside=beside,
                          hp_ports=hp_ports)


__all__ = ["conv_list_step", "conv_step_list_cycles", "conv_step_macs"]
