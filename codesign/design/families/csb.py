"""The CSB family: compressed training (kernel-wise pruning, 8-bit fixed point, CSB blocks) of an MLP, or of a
conv network on the explorer, on one CSB PE; golden loop :mod:`codesign.loops.csb`, board trainer
:mod:`codesign.deploy.csb_training`."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from codesign.design.csb_conv import conv_layers, measure_conv_host, pruned_trainer
from codesign.design.explore_model import CSB_KNOBS, CSB_TILE_KNOBS, ExploreModel, stage_array
from codesign.design.families import DesktopFamily, design_pes
from codesign.design.point import derived_pe_fields
from codesign.loops.common import HwTrainError
from codesign.train.geometry import mlp_layers
from codesign.loops.csb import CsbTrainSetup
from codesign.loops.host_share import compressed_masks, measure_csb_host
from codesign.pe.csb.spec import CsbSpec
from codesign.step.csb.time import CsbLayer, as_layers, csb_mac_energy_pj, csb_stages, csb_step_time
from codesign.step.host import HostModel

KEY = "csb"


def _no_spec_change(changes) -> None:
    if "spec" in changes:
        raise HwTrainError("the spec comes from the design point (or the spec argument), not from changes")


def csb_setup(training, spec: CsbSpec | None = None, **changes) -> CsbTrainSetup:
    """From a :class:`~codesign.train.config.TrainConfig` (MLP, compressed training, plain SGD).

    ``spec`` defaults to the CSB PE the design point derives from
    ``training``; ``changes`` override fields (not the spec).
    """
    if training.model.name != "mlp":
        raise HwTrainError(f"the CSB design-point loop trains an MLP, not model {training.model.name!r} "
                           "(its layers are FC layers on the CSB PE)")
    if set(training.techniques) != {"compress"}:
        raise HwTrainError(f"the CSB design-point loop runs techniques.compress alone, the configuration has "
                           f"{sorted(training.techniques) or 'none'}")
    optim = training.optim
    if optim.momentum or optim.weight_decay:
        raise HwTrainError(f"optim.momentum={optim.momentum} and optim.weight_decay={optim.weight_decay} must be "
                           "0: the weight-buffer update (UPD) is plain SGD")
    _no_spec_change(changes)
    if spec is None:
        (_, fields, _), = derived_pe_fields(training)
        spec = CsbSpec(**fields)
    compress = training.techniques["compress"]
    values = {"spec": spec, "layers": mlp_layers(training),
              "batch_size": optim.batch_size, "epochs": optim.epochs, "warmup_epochs": compress.warmup_epochs,
              "lr": optim.lr, "schedule": optim.schedule, "seed": training.seed,
              "drop_budget": compress.drop_budget, "step_percent": compress.step_percent,
              "max_percent": compress.max_percent, "order": compress.order,
              "validation_fraction": compress.validation_fraction, "split_seed": training.data.split_seed}
    values.update(changes)
    return CsbTrainSetup(**values)

def csb_setup_of(design, **changes) -> CsbTrainSetup:
    """From a design point: its training configuration and its (single) csb instance."""
    _no_spec_change(changes)
    instances = [instance for instance in design.instances if instance.pe == "csb"]
    if len(instances) != 1:
        raise HwTrainError(f"design {design.name!r} has {len(instances)} csb instances; the loop needs one")
    return csb_setup(design.training, instances[0].spec, **changes)


def csb_model(spec, layers: Sequence[CsbLayer | np.ndarray], batch: int, *, host: HostModel) -> ExploreModel:
    """The CSB loop: one csb IP whose block shape, lanes and groups vary (and, for a conv network, its output tile);
    ``layers`` are :class:`~codesign.step.csb.time.CsbLayer` records, or the kept weights of FC layers."""
    layers = as_layers(layers)

    def loads(pe: str, build, copies: int):
        stages, totals = csb_stages(build, layers, batch)
        return stage_array(stages), totals["calls"]

    conv = any(layer.kernel > 1 or layer.height * layer.width > 1 for layer in layers)
    return ExploreModel(name=KEY, bases={"csb": spec}, loads=loads,
                       step=lambda options, board, clock, hp_ports=1: csb_step_time(
                           options[0].spec, layers, batch, board, clock_mhz=clock, host=host),
                       stages=lambda options: csb_stages(options[0].spec, layers, batch)[0],
                       describe=lambda options: {"csb": options[0].spec.to_dict()}, host=host,
                       macs=csb_stages(spec, layers, batch)[1]["macs"], mac_energy_pj=csb_mac_energy_pj(spec),
                       knobs={"csb": {**CSB_KNOBS, **CSB_TILE_KNOBS}} if conv else {})


def csb_explorer(design, *, progress: Callable[[str], None] = print, host: HostModel | None = None) -> ExploreModel:
    """The explorer's model of ``design``'s CSB step: the kept weights after the loop's pruning (an MLP), or a
    conv network's layers from the golden trainer's masks (no board loop); the host's share measured here
    unless ``host`` is a board's figure."""
    spec = next(instance.spec for instance in design.instances if instance.pe == KEY)
    if design.training.model.name != "mlp":
        progress(f"the host's share of a step: {host.source}" if host is not None else
                 "measuring the host's share of a step (the golden step less its convolutions, this machine)")
        trainer = pruned_trainer(design.training, progress)
        layers = conv_layers(trainer)
        return csb_model(spec, layers, design.training.optim.batch_size,
                         host=host or measure_conv_host(trainer, spec, layers))
    from codesign.train.trainer import load_dataset

    progress(f"the host's share of a step: {host.source}" if host is not None else
             "measuring the host's share of a step (NumPy loop, this machine)")
    setup = csb_setup_of(design)
    progress("pruning as the CSB loop does (its warm-up epochs and kernel search) for the kept weights")
    trainer = compressed_masks(setup, load_dataset(design.training))
    return csb_model(spec, trainer.masks, setup.batch_size, host=host or measure_csb_host(trainer))


FAMILY = DesktopFamily(key=KEY, title="CSB", detect=lambda design: design_pes(design) == [KEY],
                       setup_of=csb_setup_of, explorer=csb_explorer)

__all__ = ["FAMILY", "csb_explorer", "csb_model", "csb_setup", "csb_setup_of"]
