"""The FB-float family (``fpmac_array``): an MLP trained with ABVS's adaptive fraction bits (or plain FP32) on
one FP-MAC array IP or copies of it; golden loop :mod:`codesign.loops.fb`, board trainer :mod:`codesign.deploy.training`."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from codesign.design.explore_model import (COPIES, FPMAC_ARRAY_KNOBS, FPMAC_BUFFER_KNOBS, MAX_LIST_COPIES, ExploreModel,
                                           list_step_host, list_step_host_args, phase_loads, stage_array)
from codesign.design.families import DesktopFamily, design_pes, shared_build
from codesign.design.point import derived_pe_fields
from codesign.loops.common import HwTrainError
from codesign.train.geometry import mlp_layers
from codesign.loops.fb import HwTrainSetup
from codesign.loops.fb_lists import FbListTrainer
from codesign.pe.fpmac_array.spec import FpmacArraySpec
from codesign.shell.list_runner import HOST_REPEATS, GoldenListShell, host_per_list_step
from codesign.step.fpmac_array.list_time import fb_list_step, step_list_cycles
from codesign.step.fpmac_array.time import fb_mac_energy_pj, fb_stages, fb_step_time
from codesign.step.list_cycles import BOARD_DDR
from codesign.step.time import list_stages
from codesign.step.host import GemmShape, HostModel

KEY = "fpmac_array"


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
    values = {"spec": spec, "layers": mlp_layers(training),
              "batch_size": optim.batch_size, "epochs": optim.epochs, "lr": optim.lr,
              "momentum": optim.momentum, "weight_decay": optim.weight_decay, "schedule": optim.schedule,
              "seed": training.seed, **fb}
    values.update(changes)
    return HwTrainSetup(**values)


def fb_setup_of(design, **changes) -> HwTrainSetup:
    """From a design point: its training configuration and its fpmac_array build (one instance, or copies of one
    that share each step's lists)."""
    return fb_setup(design.training, shared_build(design, KEY)[0], **changes)


def measure_fb_list_host(setup: HwTrainSetup, *, repeats: int = HOST_REPEATS, seed: int = 0, copies: int = 1
                         ) -> dict[str, float]:
    """The host's seconds per list step of ``setup`` on this machine, its lists shared among ``copies`` IPs: a
    :class:`FbListTrainer` step on random data less the golden shell's seconds (what the IPs compute instead), the
    least of ``repeats`` steps after the one that builds the lists (other work on the machine only adds); and the
    bytes the host flushed and read and the lists it started in that step."""
    shell = GoldenListShell({KEY: setup.spec}, units={KEY: copies})
    trainer = FbListTrainer(setup, shell)
    rng = np.random.default_rng(seed)
    batches = [(rng.random((setup.batch_size, setup.layers[0])).astype(np.float32),
                rng.integers(0, setup.layers[-1], setup.batch_size)) for _ in range(1 + repeats)]
    return host_per_list_step(trainer, shell, batches, warm_steps=1)


def fb_model(spec, shapes: Sequence[GemmShape], *, host: HostModel) -> ExploreModel:
    """The FB-float loop: one fpmac_array IP whose array shape varies; its GEMMs ``shapes`` (one step)."""

    def loads(pe: str, build, copies: int):
        stages, totals = fb_stages(build, list(shapes))
        return stage_array(stages), totals["calls"]

    return ExploreModel(name=KEY, bases={"fpmac_array": spec}, loads=loads,
                       # one IP a stage: the ports a design spreads its IPs over do not change a stage
                       step=lambda options, board, clock, hp_ports=1: fb_step_time(
                           options[0].spec, list(shapes), board, clock_mhz=clock, host=host),
                       stages=lambda options: fb_stages(options[0].spec, list(shapes))[0],
                       describe=lambda options: {"fpmac_array": options[0].spec.to_dict()}, host=host,
                       macs=fb_stages(spec, list(shapes))[1]["macs"], mac_energy_pj=fb_mac_energy_pj(spec))


def fb_list_model(spec: FpmacArraySpec, layers: Sequence[int], batch: int, *, host: HostModel) -> ExploreModel:
    """The FB-float step as the board runs it on an RTL-route build: call lists on one fpmac_array IP or up to four
    copies whose array shape and buffer depths vary, each phase a stage priced by the list cycle model under the HP
    port's DDR timing (:data:`codesign.step.list_cycles.BOARD_DDR`; fast,
    :func:`codesign.step.list_cycles.fast_step_cycles`); ``host`` the host's seconds a list step between its phases
    (``fixed_s``) and those it works beside them (``beside_s``: the batch's check, the loss, the next batch
    written), which a build's step hides behind the last phase as far as it reaches (the space counts them
    hidden)."""

    def priced(build, copies: int = 1):
        return step_list_cycles(build, layers, batch, ddr=BOARD_DDR, fast=True, copies=copies)

    def step(options, board, clock, hp_ports=1):
        build, copies = options[0].spec, options[0].copies
        found = priced(build, copies)
        return fb_list_step(build, layers, batch, board, clock_mhz=clock, copies=copies, priced=found,
                            hp_ports=hp_ports, **list_step_host_args(host, found))

    return ExploreModel(name=KEY, bases={KEY: spec}, step=step,
                        loads=lambda pe, build, copies: phase_loads(priced(build, copies), copies),
                        stages=lambda options: list_stages(priced(options[0].spec, options[0].copies)),
                        describe=lambda options: {KEY: {**options[0].spec.to_dict(), COPIES: options[0].copies}},
                        host=host, macs=priced(spec)["macs"], mac_energy_pj=fb_mac_energy_pj(spec),
                        max_copies=MAX_LIST_COPIES,
                        knobs={KEY: {**FPMAC_ARRAY_KNOBS, **FPMAC_BUFFER_KNOBS, COPIES: (1, 2, 3, 4)}})


def fb_explorer(design, *, progress: Callable[[str], None] = print, host: HostModel | None = None) -> ExploreModel:
    """The explorer's model of ``design``'s FB-float step as call lists (:func:`fb_list_model`, what the board
    runs on RTL-route IPs; :func:`fb_model` prices the per-call step of an HLS export); the host's seconds a
    list step measured here unless ``host`` is a board's figure."""
    setup = fb_setup_of(design)
    host = list_step_host(host, lambda: measure_fb_list_host(setup, copies=shared_build(design, KEY)[1]), progress)
    return fb_list_model(setup.spec, setup.layers, setup.batch_size, host=host)


# the ABVS FB rule (fb_min < fb_max) checks accuracy on a validation split
FAMILY = DesktopFamily(key=KEY, title="FB-float (FP-MAC array)", detect=lambda design: design_pes(design) == [KEY],
                       setup_of=fb_setup_of, explorer=fb_explorer,
                       reads_validation=lambda setup: setup["fb_min"] != setup["fb_max"])

__all__ = ["FAMILY", "fb_explorer", "fb_list_model", "fb_model", "fb_setup", "fb_setup_of", "measure_fb_list_host"]
