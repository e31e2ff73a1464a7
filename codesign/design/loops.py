"""The set-up of a design point's golden loop (:mod:`codesign.loops`), derived from its training configuration.

The loops take plain set-ups so that a board can rebuild them from design.json
(``HwTrainSetup.from_dict``); the desktop derives them here from a
:class:`~codesign.train.config.TrainConfig` and the design point's PE specs.
:func:`loop_entry` is what design.json records for the board.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from codesign.design.point import DesignPoint, derived_pe_fields
from codesign.loops.common import CLASSES, INPUT_FEATURES, HwTrainError
from codesign.loops.csb import CsbTrainSetup
from codesign.loops.fb import HwTrainSetup
from codesign.loops.tt import TtTrainSetup
from codesign.pe.csb.spec import CsbSpec
from codesign.pe.fpmac_array.spec import FpmacArraySpec


def _no_spec_change(changes) -> None:
    if "spec" in changes:
        raise HwTrainError("the spec comes from the design point (or the spec argument), not from changes")



def fb_setup(training, spec: FpmacArraySpec | None = None, **changes) -> HwTrainSetup:
    """From a :class:`~codesign.train.config.TrainConfig` (MLP; ABVS or plain FP32); ``changes`` override fields.

    ``spec`` defaults to the FP-MAC array the design point derives from
    ``training`` (:func:`codesign.design.point.derived_pe_fields`).
    """
    if training.model.name != "mlp":
        raise HwTrainError(f"the design-point loop trains an MLP, not model {training.model.name!r}")
    other = sorted(set(training.techniques) - {"abvs"})
    if other:
        raise HwTrainError(f"techniques {other} are not part of the FP-MAC array loop (ABVS or FP32 only)")
    if spec is None:
        (_, fields, _), = derived_pe_fields(training)
        spec = FpmacArraySpec(**fields)
    abvs = training.techniques.get("abvs")
    fb = {"fb_min": abvs.fb_min, "fb_max": abvs.fb_max, "alpha": abvs.alpha, "epsilon": abvs.epsilon} \
        if abvs is not None else {"fb_min": spec.max_fb, "fb_max": spec.max_fb}
    if abvs is not None and (abvs.exp_bits, abvs.rounding) != (spec.exp_bits, spec.rounding):
        raise HwTrainError(f"ABVS format (exp_bits {abvs.exp_bits}, {abvs.rounding}) is not the IP's "
                           f"(exp_bits {spec.exp_bits}, {spec.rounding})")
    optim = training.optim
    values = {"spec": spec, "layers": (INPUT_FEATURES, *training.model.hidden, CLASSES),
              "batch_size": optim.batch_size, "epochs": optim.epochs, "lr": optim.lr,
              "momentum": optim.momentum, "weight_decay": optim.weight_decay, "schedule": optim.schedule,
              "seed": training.seed, **fb}
    values.update(changes)
    return HwTrainSetup(**values)

def fb_setup_of(design, **changes) -> HwTrainSetup:
    """From a design point: its training configuration and its (single) fpmac_array instance."""
    arrays = [instance for instance in design.instances if instance.pe == "fpmac_array"]
    if len(arrays) != 1:
        raise HwTrainError(f"design {design.name!r} has {len(arrays)} fpmac_array instances; the loop needs one")
    return fb_setup(design.training, arrays[0].spec, **changes)


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
    values = {"spec": spec, "layers": (INPUT_FEATURES, *training.model.hidden, CLASSES),
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


LOOP_SETUPS = {"fpmac_array": fb_setup_of, "csb": csb_setup_of}  # PE family -> its loop's set-up of a design


def tt_setup_of(design: DesignPoint, **changes) -> TtTrainSetup:
    """The NumPy TT loop of a design with ``techniques.tt``: its layers as the step sees them (core shapes at the
    initial ranks, bias, which one takes the network's input), precision, Adam, schedule, rank prior, TT IPs."""
    training = design.training
    if "tt" not in training.techniques:
        raise HwTrainError("the TT loop trains a configuration with techniques.tt")
    if set(training.techniques) != {"tt"}:
        raise HwTrainError(f"the TT loop trains techniques.tt alone, not with {sorted(set(training.techniques) - {'tt'})}")
    from codesign.train.techniques.tt import tt_model_config
    from codesign.train.tt.model import TTMLP
    from codesign.train.tt.pe_check import layer_state

    model = tt_model_config(training)
    states = [layer_state(layer) for layer in TTMLP(model).layers]
    prior = training.techniques["tt"].prior
    optim = training.optim
    values = {"batch_size": optim.batch_size, "epochs": optim.epochs, "lr": optim.lr,
              "weight_decay": optim.weight_decay, "schedule": optim.schedule, "seed": training.seed,
              "precision": dataclasses.asdict(model.precision),
              "layers": tuple({"core_shapes": [list(core.shape) for core in state.cores], "bias": state.bias is not None,
                               "in_features": state.in_features, "out_features": state.out_features,
                               "is_network_input": index == 0} for index, state in enumerate(states)),
              "ips": tuple((i.name, i.pe, i.spec.to_dict()) for i in design.instances if i.pe.startswith("tt")),
              "prior_weight": prior.weight, "warmup_epochs": prior.warmup_epochs, "threshold": prior.threshold,
              "prune_from_epoch": prior.prune_from_epoch, "min_rank": prior.min_rank, "clip_shadow": prior.clip_shadow,
              "forward_split": design.forward_split}
    return TtTrainSetup(**{**values, **changes})


def loop_entry(design: DesignPoint) -> dict[str, Any] | None:
    """design.json's ``loop``: the family and set-up of the design's golden loop, or None (no loop a board runs)."""
    if "tt" in design.training.techniques:
        if any(not i.pe.startswith("tt") for i in design.instances):
            return None
        try:
            return {"family": "tt", "setup": tt_setup_of(design).to_dict()}
        except HwTrainError:
            return None
    families = [pe for pe in LOOP_SETUPS if any(instance.pe == pe for instance in design.instances)]
    if len(families) != 1 or len(design.instances) != 1:
        return None
    try:
        setup = LOOP_SETUPS[families[0]](design)
    except HwTrainError:
        return None
    return {"family": families[0], "setup": setup.to_dict()}
