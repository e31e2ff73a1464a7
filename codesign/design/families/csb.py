"""The CSB family: compressed training (kernel-wise pruning, 8-bit fixed point, CSB blocks) of an MLP, or of a
ResNet on the explorer, on one CSB PE; golden loop :mod:`codesign.loops.csb`, board trainer
:mod:`codesign.deploy.csb_training`. A conv network (model 'convnet') is the CSB conv family's
(:mod:`codesign.design.families.csb_conv`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from codesign.design.csb_conv import conv_layers, measure_conv_host, pruned_trainer
from codesign.design.explore_model import (COPIES, CSB_KNOBS, CSB_LIST_KNOBS, CSB_TILE_KNOBS, MAX_LIST_COPIES,
                                           ExploreModel, list_step_host, list_step_host_args, phase_loads,
                                           stage_array)
from codesign.design.families import DesktopFamily, design_pes, shared_build
from codesign.design.point import derived_pe_fields
from codesign.loops.common import HwTrainError
from codesign.train.geometry import mlp_layers
from codesign.loops.csb import CsbTrainSetup
from codesign.loops.csb_lists import CsbListTrainer, check_list_spec
from codesign.shell.list_runner import HOST_REPEATS, GoldenListShell, host_per_list_step
from codesign.loops.host_share import compressed_masks
from codesign.pe.csb.format import encode
from codesign.step.csb.arena import loss_on_pe
from codesign.step.csb.list_time import csb_list_step, step_list_cycles
from codesign.step.list_cycles import BOARD_DDR
from codesign.step.time import list_stages
from codesign.pe.csb.spec import CsbSpec
from codesign.step.csb.time import CsbLayer, as_layers, csb_mac_energy_pj, csb_stages, csb_step_time
from codesign.step.host import HostModel

KEY = "csb"


def compressed_fields(training) -> dict:
    """The set-up fields a compressed loop (MLP or conv) takes from a configuration: SGD, the warm-up and the
    pruning search; refused where the configuration asks what the PE's update cannot do."""
    if set(training.techniques) != {"compress"}:
        raise HwTrainError(f"the CSB design-point loop runs techniques.compress alone, the configuration has "
                           f"{sorted(training.techniques) or 'none'}")
    optim = training.optim
    if optim.momentum or optim.weight_decay:
        raise HwTrainError(f"optim.momentum={optim.momentum} and optim.weight_decay={optim.weight_decay} must be "
                           "0: the weight-buffer update (UPD) is plain SGD")
    compress = training.techniques["compress"]
    return {"batch_size": optim.batch_size, "epochs": optim.epochs, "warmup_epochs": compress.warmup_epochs,
            "lr": optim.lr, "schedule": optim.schedule, "seed": training.seed,
            "drop_budget": compress.drop_budget, "step_percent": compress.step_percent,
            "max_percent": compress.max_percent, "order": compress.order,
            "validation_fraction": compress.validation_fraction, "split_seed": training.data.split_seed}


def refuse_spec_change(changes) -> None:
    if "spec" in changes:
        raise HwTrainError("the spec comes from the design point (or the spec argument), not from changes")


def derived_spec(training, spec: CsbSpec | None, changes) -> CsbSpec:
    """``spec``, or the CSB PE the design point derives from ``training``; the spec is not a change."""
    refuse_spec_change(changes)
    if spec is None:
        (_, fields, _), = derived_pe_fields(training)
        spec = CsbSpec(**fields)
    return spec


def csb_setup(training, spec: CsbSpec | None = None, **changes) -> CsbTrainSetup:
    """From a :class:`~codesign.train.config.TrainConfig` (MLP, compressed training, plain SGD).

    ``spec`` defaults to the CSB PE the design point derives from
    ``training``; ``changes`` override fields (not the spec).
    """
    if training.model.name != "mlp":
        raise HwTrainError(f"the CSB design-point loop trains an MLP, not model {training.model.name!r} "
                           "(its layers are FC layers on the CSB PE; a conv network is model 'convnet')")
    values = {"spec": derived_spec(training, spec, changes), "layers": mlp_layers(training),
              **compressed_fields(training)}
    values.update(changes)
    return CsbTrainSetup(**values)


def csb_setup_of(design, **changes) -> CsbTrainSetup:
    """From a design point: its training configuration and its csb build, refused where copies of it could not
    share a step (only call lists are shared)."""
    refuse_spec_change(changes)
    build, copies = shared_build(design, KEY)
    setup = csb_setup(design.training, build, **changes)
    if copies > 1 and not runs_lists(setup.spec):
        raise HwTrainError(f"design {design.name!r}: {copies} csb copies share a step as call lists only, and this "
                           f"build does not run them ({list_spec_problem(setup.spec)})")
    return setup


def csb_model(spec, layers: Sequence[CsbLayer | np.ndarray], batch: int, *, host: HostModel) -> ExploreModel:
    """The CSB loop: one csb IP whose block shape, lanes and groups vary (and, for a conv network, its output tile);
    ``layers`` are :class:`~codesign.step.csb.time.CsbLayer` records, or the kept weights of FC layers."""
    layers = as_layers(layers)

    def loads(pe: str, build, copies: int):
        stages, totals = csb_stages(build, layers, batch)
        return stage_array(stages), totals["calls"]

    conv = any(layer.kernel > 1 or layer.height * layer.width > 1 for layer in layers)
    # a k x k conv at stride 2 runs at stride 2 on a build with max_stride 2: larger buffers, a quarter of the MACs
    strides = {"max_stride": (1, 2)} if any(layer.stride > 1 for layer in layers) else {}
    return ExploreModel(name=KEY, bases={"csb": spec}, loads=loads,
                       step=lambda options, board, clock, hp_ports=1: csb_step_time(
                           options[0].spec, layers, batch, board, clock_mhz=clock, host=host),
                       stages=lambda options: csb_stages(options[0].spec, layers, batch)[0],
                       describe=lambda options: {"csb": options[0].spec.to_dict()}, host=host,
                       macs=csb_stages(spec, layers, batch)[1]["macs"], mac_energy_pj=csb_mac_energy_pj(spec),
                       knobs={"csb": {**CSB_KNOBS, **CSB_TILE_KNOBS, **strides}} if conv else {})


def measure_csb_list_host(trainer, *, repeats: int = HOST_REPEATS, seed: int = 0, copies: int = 1,
                          loss: bool | None = None) -> dict[str, float]:
    """The host's seconds per list step of a golden loop past its pruning (:func:`compressed_masks`) on this
    machine, its lists shared among ``copies`` IPs (a step of more phases on more IPs): a :class:`CsbListTrainer`
    from its state, stepped on random data, less the golden shell's seconds (what the IPs compute instead), the
    least of ``repeats`` steps after the one that builds the lists; and the bytes flushed and read and the lists
    started in that step. ``loss``: the build with or without the LOSS unit (None: the set-up's), which moves the
    loss gradient's codes off the host."""
    setup = trainer.setup if loss is None else replace(trainer.setup, spec=replace(trainer.setup.spec, loss=loss))
    shell = GoldenListShell({KEY: setup.spec}, units={KEY: copies})
    lists = CsbListTrainer(setup, shell)
    lists.load_weights(trainer.read_weights())
    rng = np.random.default_rng(seed)
    batches = [(rng.random((setup.batch_size, setup.layers[0])), rng.integers(0, setup.layers[-1], setup.batch_size))
               for _ in range(1 + repeats)]
    return host_per_list_step(lists, shell, batches, warm_steps=1)


def list_spec_problem(spec: CsbSpec) -> str | None:
    """Why the CSB step's lists do not run on ``spec`` (:func:`codesign.loops.csb_lists.check_list_spec`), or
    None."""
    try:
        check_list_spec(spec)
    except HwTrainError as error:
        return str(error)
    return None


def runs_lists(spec: CsbSpec) -> bool:
    """Whether the CSB step's lists run on ``spec``."""
    return list_spec_problem(spec) is None


def csb_list_model(spec: CsbSpec, layers: Sequence[int], batch: int, masks: Sequence[np.ndarray], *,
                   host: HostModel, host_with_loss: HostModel | None = None) -> ExploreModel:
    """The fixed-point CSB step of an MLP as the board runs it on an RTL-route build: call lists on one csb IP or
    copies of it whose square block, lanes and multipliers vary (the builds the lists run on), the kept weights
    ``masks`` encoded for each block shape; each phase a stage priced by the list cycle model under the HP port's
    DDR timing (fast, :func:`codesign.step.list_cycles.fast_step_cycles`); ``host`` the host's seconds a list step
    between its phases (``fixed_s``) and those it works beside them (``beside_s``: the batch's check, the loss,
    the next batch written), which a build's step hides behind the last phase as far as it reaches (the space
    counts them hidden); ``host_with_loss`` the same on a build with the LOSS unit (``loss`` is a knob where it is
    given), whose host computes no loss gradient between the phases."""
    encoded: dict[tuple[int, int], list] = {}

    def structures(build: CsbSpec) -> list:
        shape = (build.block_rows, build.block_cols)
        if shape not in encoded:
            encoded[shape] = [encode(np.asarray(mask, dtype=np.int8), block_rows=shape[0], block_cols=shape[1])
                              for mask in masks]
        return encoded[shape]

    def priced(build: CsbSpec, copies: int = 1):
        return step_list_cycles(build, layers, batch, structures(build), ddr=BOARD_DDR, fast=True, copies=copies)

    def step(options, board, clock, hp_ports=1):
        build, copies = options[0].spec, options[0].copies
        found = priced(build, copies)
        on_pe = host_with_loss is not None and loss_on_pe(build, layers[-1])
        return csb_list_step(build, layers, batch, structures(build), board, clock_mhz=clock, copies=copies,
                             priced=found, hp_ports=hp_ports,
                             **list_step_host_args(host_with_loss if on_pe else host, found))

    knobs = CSB_LIST_KNOBS if host_with_loss is not None else \
        {name: values for name, values in CSB_LIST_KNOBS.items() if name != "loss"}

    return ExploreModel(name=KEY, bases={KEY: spec}, loads=lambda pe, build, copies: phase_loads(
                            priced(build, copies), copies), step=step,
                        stages=lambda options: list_stages(priced(options[0].spec, options[0].copies)),
                        describe=lambda options: {KEY: {**options[0].spec.to_dict(), COPIES: options[0].copies}},
                        host=host, macs=priced(spec)["macs"], mac_energy_pj=csb_mac_energy_pj(spec),
                        host_of=None if host_with_loss is None else lambda build: (
                            host_with_loss if loss_on_pe(build, layers[-1]) else host),
                        max_copies=MAX_LIST_COPIES, knobs={KEY: knobs},
                        runs=lambda pe, build: runs_lists(build))


def csb_explorer(design, *, progress: Callable[[str], None] = print, host: HostModel | None = None) -> ExploreModel:
    """The explorer's model of ``design``'s CSB step: for an MLP, the fixed-point step as call lists
    (:func:`csb_list_model`, what the board runs on RTL-route IPs; :func:`csb_model` prices the per-call step of
    an HLS export) on the kept weights after the loop's pruning; for a conv network, its layers from the golden
    trainer's masks, one call at a time (no board loop). The host's share is measured here unless ``host`` is a
    board's figure."""
    spec = next(instance.spec for instance in design.instances if instance.pe == KEY)
    if design.training.model.name != "mlp":
        progress(f"the host's share of a step: {host.source}" if host is not None else
                 "measuring the host's share of a step (the golden step less its convolutions, this machine)")
        trainer = pruned_trainer(design.training, progress)
        layers = conv_layers(trainer)
        return csb_model(spec, layers, design.training.optim.batch_size,
                         host=host or measure_conv_host(trainer, spec, layers))
    from codesign.train.trainer import load_dataset

    setup = csb_setup_of(design)
    progress("pruning as the CSB loop does (its warm-up epochs and kernel search) for the kept weights")
    trainer = compressed_masks(setup, load_dataset(design.training))
    copies = shared_build(design, KEY)[1]
    measured = host is None  # a board's figure stands for both builds
    host = list_step_host(host, lambda: measure_csb_list_host(trainer, copies=copies, loss=False), progress)
    with_loss = list_step_host(None, lambda: measure_csb_list_host(trainer, copies=copies, loss=True),
                               progress) if measured and loss_on_pe(replace(spec, loss=True), setup.layers[-1]) \
        else None
    return csb_list_model(spec, setup.layers, setup.batch_size, trainer.masks, host=host,
                          host_with_loss=with_loss)


FAMILY = DesktopFamily(key=KEY, title="CSB", detect=lambda design: design_pes(design) == [KEY]
                       and design.training.model.name != "convnet",
                       setup_of=csb_setup_of, explorer=csb_explorer)

__all__ = ["FAMILY", "compressed_fields", "csb_explorer", "csb_list_model", "csb_model", "csb_setup", "csb_setup_of",
           "derived_spec", "measure_csb_list_host", "refuse_spec_change", "runs_lists",
           "list_spec_problem"]
