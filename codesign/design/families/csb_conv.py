"""The CSB conv family: compressed training (kernel-wise pruning, 8-bit fixed point, CSB blocks) of a conv network
(model 'convnet': 'same' 3 x 3 convs with ReLU, residual blocks without batch norm, a dense head) on one CSB PE or
copies of it, every fixed-point step as call lists; golden loop :mod:`codesign.loops.csb_conv`, board trainer
:mod:`codesign.deploy.csb_conv_training`.

Why a family of its own beside the CSB one: its set-up (the image and the convs), its golden loop and its board
trainer are the conv loop's, and a board reads which from design.json's ``loop.family``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from codesign.design.explore_model import (COPIES, MAX_LIST_COPIES, ExploreModel, list_step_host, list_step_host_args,
                                           phase_loads)
from codesign.design.families import DesktopFamily, design_pes, shared_build
from codesign.design.families.csb import compressed_fields, derived_spec, refuse_spec_change
from codesign.loops.common import HwTrainError
from codesign.loops.csb_conv import CsbConvSetup
from codesign.loops.csb_conv_lists import CsbConvListTrainer, check_conv_list_spec
from codesign.pe.csb.spec import CsbSpec
from codesign.shell.list_runner import HOST_REPEATS, GoldenListShell, host_per_list_step
from codesign.step.csb.conv_list_time import conv_list_step, conv_step_list_cycles, conv_step_macs
from codesign.step.csb.conv_step import conv_structures
from codesign.step.csb.lists import PE
from codesign.step.csb.time import csb_mac_energy_pj
from codesign.step.host import HostModel
from codesign.step.list_cycles import BOARD_DDR
from codesign.step.time import list_stages
from codesign.train.geometry import data_geometry

KEY = "csb_conv"
# the conv lists' builds: blocks and output tiles square (``runs``), lanes a multiple of 4 per 32-bit part of the
# stream's beat (so 4 lanes run on 32 bits only, 8 on 32 or 64, 16 on any). Each block shape, lane count, tile,
# stream width and copy count is a step simulated once (about 20 s for the example's network); multipliers re-price
# it. Copies past the cap are not simulated (``pe_options``' limit): two of the example's 16-lane builds fill 73 % of
# the ZedBoard's LUT, so most three- and four-copy builds never are
CSB_CONV_LIST_KNOBS = {"block_rows": (8, 16), "block_cols": (8, 16), "batch": (4, 8, 16), "parallel": (1, 2, 4, 8),
                       "out_h": (2, 4), "out_w": (2, 4), "stream_bits": (32, 64, 128), COPIES: (1, 2, 3, 4)}


def csb_conv_setup(training, spec: CsbSpec | None = None, **changes) -> CsbConvSetup:
    """From a :class:`~codesign.train.config.TrainConfig` (model 'convnet' on images, compressed training, plain
    SGD). ``spec`` defaults to the CSB PE the design point derives from ``training``; ``changes`` override
    fields (not the spec)."""
    model = training.model
    if model.name != "convnet":
        raise HwTrainError(f"the CSB conv loop trains model 'convnet', not {model.name!r}")
    geometry = data_geometry(training.data)
    if len(geometry.sample_shape) != 3:
        raise HwTrainError(f"model 'convnet' takes images; the data's samples are rows of "
                           f"{int(np.prod(geometry.sample_shape))} features")
    values = {"spec": derived_spec(training, spec, changes), "image": tuple(geometry.sample_shape),
              "convs": tuple(zip(model.channels, model.strides)), "blocks": model.blocks, "classes": geometry.classes,
              **compressed_fields(training)}
    values.update(changes)
    return CsbConvSetup(**values)


def csb_conv_setup_of(design, **changes) -> CsbConvSetup:
    """From a design point: its training configuration and its csb build (one instance, or copies of one),
    refused where the conv lists cannot run on that build."""
    refuse_spec_change(changes)
    setup = csb_conv_setup(design.training, shared_build(design, PE)[0], **changes)
    check_conv_list_spec(setup.spec, setup)
    return setup


def pruned_list_trainer(setup: CsbConvSetup, data, *, max_steps: int | None = None,
                        copies: int = 1) -> CsbConvListTrainer:
    """A list trainer of ``setup`` on the golden shell of ``copies`` csb IPs past its warm-up epochs and pruning
    search (``max_steps`` shortens each warm-up epoch): its ``masks`` are the kept kernels every fixed-point step
    works on."""
    trainer = CsbConvListTrainer(setup, GoldenListShell({PE: setup.spec}, units={PE: copies}))
    trainer.fit(data, epochs=setup.warmup_epochs, progress=False, max_steps=max_steps)
    return trainer


def measure_conv_list_host(trainer: CsbConvListTrainer, *, repeats: int = HOST_REPEATS, seed: int = 0) -> dict[str, float]:
    """The host's seconds per list step of a pruned list trainer (:func:`pruned_list_trainer`) on this machine,
    stepped on random images: the least of ``repeats`` steps after the one that builds the lists, less the golden
    shell's seconds; and the bytes flushed and read and the lists started in that step."""
    setup = trainer.setup
    rng = np.random.default_rng(seed)
    batches = [(rng.random((setup.batch_size, *setup.image)), rng.integers(0, setup.classes, setup.batch_size))
               for _ in range(1 + repeats)]
    return host_per_list_step(trainer, trainer.shell, batches, warm_steps=1)


def runs_conv_lists(setup: CsbConvSetup, build: CsbSpec) -> bool:
    """Whether ``setup``'s network runs as conv lists on ``build`` (square blocks and tiles: the explorer's
    space)."""
    if build.block_rows != build.block_cols or build.out_h != build.out_w:
        return False
    try:
        check_conv_list_spec(build, dataclasses.replace(setup, spec=build))
    except HwTrainError:
        return False
    return True


def conv_list_model(setup: CsbConvSetup, masks: Sequence[np.ndarray], *, host: HostModel) -> ExploreModel:
    """The fixed-point step of ``setup``'s network with the kept kernels ``masks`` as the board runs it: its call
    lists on one csb IP, or shared among copies of it, whose blocks, lanes, multipliers and output tile vary, each
    phase a stage priced by the list cycle model under the HP port's DDR timing (fast: a list shape simulated
    once); ``host`` the host's seconds a list step between its phases (``fixed_s``) and those it works beside the
    last (``beside_s``: the loss, the next batch written), which a build's step hides as far as that phase
    reaches."""
    net, blocks = (setup.image, setup.convs, setup.classes, setup.batch_size), setup.blocks
    shapes = setup.shapes_and_blocks[0]
    priced_by: dict[tuple[CsbSpec, int], dict] = {}

    def priced(build: CsbSpec, copies: int) -> dict:
        if (build, copies) not in priced_by:
            priced_by[build, copies] = conv_step_list_cycles(build, *net, conv_structures(build, masks, shapes),
                                                             ddr=BOARD_DDR, fast=True, copies=copies, blocks=blocks)
        return priced_by[build, copies]

    def step(options, board, clock, hp_ports=1):
        build, copies = options[0].spec, options[0].copies
        found = priced(build, copies)
        return conv_list_step(build, *net, masks, board, clock_mhz=clock, copies=copies, priced=found,
                              hp_ports=hp_ports, blocks=blocks, **list_step_host_args(host, found))

    spec = setup.spec
    return ExploreModel(name=KEY, bases={PE: spec}, loads=lambda pe, build, copies: phase_loads(
                            priced(build, copies), copies), step=step,
                        stages=lambda options: list_stages(priced(options[0].spec, options[0].copies)),
                        describe=lambda options: {PE: {**options[0].spec.to_dict(), COPIES: options[0].copies}},
                        host=host, macs=conv_step_macs(spec, *net, masks, blocks)["macs"],
                        mac_energy_pj=csb_mac_energy_pj(spec), max_copies=MAX_LIST_COPIES,
                        knobs={PE: CSB_CONV_LIST_KNOBS}, runs=lambda pe, build: runs_conv_lists(setup, build),
                        simulates=True)


def csb_conv_explorer(design, *, progress: Callable[[str], None] = print,
                      host: HostModel | None = None) -> ExploreModel:
    """The explorer's model of ``design``'s conv step as call lists (:func:`conv_list_model`) on the kept kernels
    after the loop's own warm-up and pruning search; the host's share measured here unless ``host`` is a board's
    figure."""
    from codesign.train.trainer import load_dataset

    setup = csb_conv_setup_of(design)
    progress(f"the conv loop's warm-up ({setup.warmup_epochs} epochs, float64 NumPy) and pruning search, for the "
             "kept kernels")
    trainer = pruned_list_trainer(setup, load_dataset(design.training), copies=shared_build(design, PE)[1])
    host = list_step_host(host, lambda: measure_conv_list_host(trainer), progress)
    return conv_list_model(setup, trainer.masks, host=host)


FAMILY = DesktopFamily(key=KEY, title="CSB conv", detect=lambda design: design_pes(design) == [PE]
                       and design.training.model.name == "convnet",
                       setup_of=csb_conv_setup_of, explorer=csb_conv_explorer)

__all__ = ["CSB_CONV_LIST_KNOBS", "FAMILY", "conv_list_model", "csb_conv_explorer", "csb_conv_setup",
           "csb_conv_setup_of", "measure_conv_list_host", "pruned_list_trainer", "runs_conv_lists"]
