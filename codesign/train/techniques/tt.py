"""Rank-adaptive, low-precision tensor-train (TT) training as a technique of the training configuration (paper 003).

``[techniques.tt]`` turns the configuration's MLP (``model.name = "mlp"``,
layer sizes ``64, *model.hidden, 10``) into an MLP of
:class:`~codesign.train.tt.layer.TTLinear` layers and trains it as
:func:`codesign.train.tt.model.tt_trainer` does: the TT model seeded from the
run's seed, Adam over the full-precision shadow cores, and the low-rank
prior with rank pruning (:class:`~codesign.train.tt.rank.RankAdaptation`,
which this technique is). TOML shape::

    [model]
    name = "mlp"
    hidden = [64]
    [techniques.tt]
    max_rank = 4                        # cap of every inner TT rank at the start
    order = 3                           # cores per layer when the modes are factorised automatically
    # in_modes = [[4, 4, 4], [4, 4, 4]] # or give every layer's modes (products = the layer's sizes)
    # out_modes = [[4, 4, 4], [2, 5, 1]]
    [techniques.tt.precision]           # bits (codesign.train.tt.precision.TTPrecision)
    core_bits = 4
    activation_bits = 8
    grad_bits = 16
    [techniques.tt.prior]               # codesign.train.tt.rank.RankPrior
    weight = 1.0
    warmup_epochs = 2

Without ``in_modes``/``out_modes`` every layer size is factorised into
``order`` modes by :func:`factorize` (prime factors, the largest first, each
onto the mode with the smallest product so far; 1s pad a size with too few
factors). The hardware of a design point with this technique is the TT PEs
(:func:`pe_widths`, :mod:`codesign.design.point`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from codesign.train.config import ConfigError, TrainConfig, require
from codesign.train.tt.model import TTLayerSpec, TTMLPConfig, use_tt_model
from codesign.train.tt.modes import factorize, layer_modes, layer_sizes  # noqa: F401 (factorize re-exported)
from codesign.train.tt.precision import TTPrecision
from codesign.train.tt.rank import RankAdaptation, RankPrior
from codesign.train.tt.ttm import check_modes

if TYPE_CHECKING:
    from codesign.train.trainer import Trainer

PREFIX = "techniques.tt"  # where this config sits in a TrainConfig (TrainConfig validates techniques.<name>)
ORDER_RANGE = (1, 8)  # cores per layer
PE_MAX_BITS = 16  # the TT PEs take operand codes of at most 16 bits (codesign.pe.tt.contract.OPERAND_BITS)


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _nested(cls, value: Any, name: str):
    """A nested table given as a dict (from TOML) becomes ``cls``; its own validation names ``techniques.tt.<name>``."""
    if not isinstance(value, dict):
        return value
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(value) - known)
    require(not unknown, f"{PREFIX}.{name}.{unknown[0] if unknown else ''}",
            f"unknown field (known: {', '.join(sorted(known))})")
    try:
        return cls(**value)
    except ConfigError as error:
        raise ConfigError(f"{PREFIX}.{error}") from None  # cls validates under the prefix ``name``
    except TypeError as error:
        raise ConfigError(f"{PREFIX}.{name}: {error}") from None


def _modes_tuple(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(tuple(item) if isinstance(item, list) else item for item in value)
    return value


@dataclass(frozen=True, kw_only=True)
class Config:
    """TT layers of the MLP: modes (given, or ``order`` automatic ones), initial rank cap, precision (bits), prior.

    ``in_modes``/``out_modes``: one tuple of mode sizes per layer (both or
    neither); ``max_rank``: the cap of every inner rank when the cores are
    made by TT-SVD; ``precision``: operand widths in bits and scale margins;
    ``prior``: the low-rank prior and the pruning rule (weight 0 keeps the
    ranks; ``clip_shadow`` still applies).
    """

    in_modes: tuple[tuple[int, ...], ...] = ()
    out_modes: tuple[tuple[int, ...], ...] = ()
    order: int = 3
    max_rank: int = 8
    precision: TTPrecision = field(default_factory=TTPrecision)
    prior: RankPrior = field(default_factory=RankPrior)

    def __post_init__(self) -> None:
        object.__setattr__(self, "in_modes", _modes_tuple(self.in_modes))
        object.__setattr__(self, "out_modes", _modes_tuple(self.out_modes))
        object.__setattr__(self, "precision", _nested(TTPrecision, self.precision, "precision"))
        object.__setattr__(self, "prior", _nested(RankPrior, self.prior, "prior"))

    def validate(self, prefix: str = PREFIX) -> None:
        require(_int(self.order) and ORDER_RANGE[0] <= self.order <= ORDER_RANGE[1], f"{prefix}.order",
                f"must be an int in [{ORDER_RANGE[0]}, {ORDER_RANGE[1]}] (cores per layer), got {self.order!r}")
        require(_int(self.max_rank) and self.max_rank >= 1, f"{prefix}.max_rank",
                f"must be an int >= 1, got {self.max_rank!r}")
        for name in ("in_modes", "out_modes"):
            modes = getattr(self, name)
            require(isinstance(modes, tuple), f"{prefix}.{name}", f"must be a list of mode lists, got {modes!r}")
            for index, layer in enumerate(modes):
                check_modes(layer, f"{prefix}.{name}[{index}]")
        require(len(self.in_modes) == len(self.out_modes), f"{prefix}.out_modes",
                f"gives {len(self.out_modes)} layers, in_modes {len(self.in_modes)} (give both or neither)")
        for index, (ins, outs) in enumerate(zip(self.in_modes, self.out_modes)):
            require(len(ins) == len(outs), f"{prefix}.out_modes[{index}]",
                    f"needs as many modes as in_modes[{index}] ({len(ins)}), got {len(outs)}")
        require(isinstance(self.precision, TTPrecision), f"{prefix}.precision",
                f"must be a table of TTPrecision fields, got {type(self.precision).__name__}")
        self.precision.validate(f"{prefix}.precision")
        require(isinstance(self.prior, RankPrior), f"{prefix}.prior",
                f"must be a table of RankPrior fields, got {type(self.prior).__name__}")
        self.prior.validate(f"{prefix}.prior")


def tt_model_config(training: TrainConfig) -> TTMLPConfig:
    """The TT MLP of a configuration with ``techniques.tt``: its layers' modes and rank caps, and its precision."""
    modes = layer_modes(training)  # refuses a configuration without techniques.tt, or with modes that do not fit
    config: Config = training.techniques["tt"]
    sizes = layer_sizes(training)
    specs = tuple(TTLayerSpec(in_modes=ins, out_modes=outs, max_rank=config.max_rank) for ins, outs in modes)
    return TTMLPConfig(layers=specs, precision=config.precision, inputs=sizes[0], classes=sizes[-1])


def pe_widths(config: Config, prefix: str = PREFIX) -> dict[str, dict[str, int]]:
    """Operand widths (bits) of the TT PEs that run this configuration's layer steps, per PE.

    PE1 (core gradients) takes gradients against activations, PE2 (forward
    and input gradients) activations or gradients against cores, PE3 (the
    outer product of the dense weight gradient) activations against
    gradients. The PEs' host rounds to nearest, ties to even, and keeps every
    state between contractions as codes, which the precision must say too.
    These are what the precision needs; a design builds wider PEs for the
    step as call lists (:func:`pe_needs`).
    """
    q = config.precision
    require(q.rounding == "nearest_even", f"{prefix}.precision.rounding",
            f"the TT PEs' host rounds to nearest, ties to even; got {q.rounding!r}")
    require(q.quantize_intermediates, f"{prefix}.precision.quantize_intermediates",
            "must be true on the TT PEs: the states between contractions go to the PEs as codes")
    for name in ("core_bits", "activation_bits", "grad_bits"):
        require(getattr(q, name) <= PE_MAX_BITS, f"{prefix}.precision.{name}",
                f"the TT PEs take codes of at most {PE_MAX_BITS} bits, got {getattr(q, name)}")
    return {"tt1": {"a_bits": q.grad_bits, "b_bits": q.activation_bits},
            "tt2": {"a_bits": max(q.activation_bits, q.grad_bits), "b_bits": q.core_bits},
            "tt3": {"a_bits": q.activation_bits, "b_bits": q.grad_bits}}


class Technique(RankAdaptation):
    """The TT model, Adam and the rank prior in the project's trainer; attached first, so other techniques see it."""

    name = "tt"

    def __init__(self, config: Config) -> None:
        require(isinstance(config, Config), PREFIX, f"expected a tt Config, got {type(config).__name__}")
        super().__init__(config.prior)
        self.tt_config = config
        self.model_config: TTMLPConfig | None = None

    def attach(self, trainer: Trainer) -> None:
        self.model_config = tt_model_config(trainer.config)
        use_tt_model(trainer, self.model_config)
        super().attach(trainer)

    def report(self) -> dict[str, Any]:
        """The rank report, plus the layers' modes, the TT parameters now and those of the dense MLP they replace."""
        layers = [dataclasses.asdict(spec) for spec in self.model_config.layers] if self.model_config else []
        dense = sum(spec.in_features * spec.out_features + spec.out_features
                    for spec in self.model_config.layers) if self.model_config else 0
        parameters = sum(int(p.numel()) for layer in self.layers for p in layer.parameters())
        return {**super().report(), "layers": layers, "parameters": parameters, "dense_parameters": dense}


def pe_needs(training: TrainConfig) -> list:
    """PE1, PE2 and PE3 with the operand widths of the TT precision; the model's layers must be valid first.

    Under the tracked scale rule the step runs as call lists (:mod:`codesign.step.tt.step_lists`), whose
    tensors PE1 and PE2 both read in 16-bit slots (a state feeds PE2 as A and PE1 as B): both are built for
    16-bit A and B operands, which a DSP multiplies as cheaply as 16 x 4 bits."""
    model = tt_model_config(training)
    widths = pe_widths(training.techniques["tt"])
    q = model.precision
    if q.scale_rule == "tracked":
        widths = {**widths, "tt1": {"a_bits": 16, "b_bits": 16}, "tt2": {"a_bits": 16, "b_bits": 16}}
    shapes = "; ".join(f"{'x'.join(map(str, spec.out_modes))} <- {'x'.join(map(str, spec.in_modes))}"
                       for spec in model.layers)
    rank = training.techniques["tt"].max_rank
    return [("tt1", widths["tt1"], f"TT core gradients: {q.grad_bits}-bit gradients x {q.activation_bits}-bit states "
                                   f"(layers {shapes}, ranks <= {rank})"),
            ("tt2", widths["tt2"], f"TT forward and input-gradient contractions: {q.activation_bits}-bit states or "
                                   f"{q.grad_bits}-bit gradients x {q.core_bits}-bit cores"),
            ("tt3", widths["tt3"], f"TT outer product of the dense weight gradient ({q.activation_bits} x "
                                   f"{q.grad_bits} bits), paper 003's PE3; "
                                   + ("it forms dW on the dense core-gradient route" if q.core_grad_route == "dense"
                                      else "the direct core-gradient route does not call it"))]
