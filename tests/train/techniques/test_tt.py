"""The tt technique: validated config with errors naming the field, automatic factorisation, the TT MLP it builds,
and a trainer with techniques.tt that is tt_trainer's run, bit for bit."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from codesign.train.config import ConfigError, DataConfig, ModelConfig, OptimConfig, TrainConfig, config_from_dict, \
    load_config
from codesign.train.techniques import build_techniques
from codesign.train.techniques.tt import Config, factorize, pe_widths, tt_model_config
from codesign.train.trainer import Trainer
from codesign.train.tt import RankPrior, TTLinear, TTPrecision, tt_layers, tt_trainer

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "digits_tt.toml"
# 160 synthetic training images in batches of 40: 4 steps per epoch
BASE = TrainConfig(seed=5, data=DataConfig(name="synthetic", synthetic_samples=200, test_fraction=0.2),
                   model=ModelConfig(name="mlp", hidden=(16,)),
                   optim=OptimConfig(epochs=2, batch_size=40, lr=0.01, weight_decay=0.0))
RAW = {"model": {"name": "mlp", "hidden": [16]}}


def with_tt(config: TrainConfig = BASE, **fields) -> TrainConfig:
    return config.replace(techniques={"tt": Config(**fields)})


@pytest.mark.parametrize("features, order, expected", [
    (64, 3, (4, 4, 4)), (10, 3, (5, 2, 1)), (128, 3, (8, 4, 4)), (16, 2, (4, 4)), (7, 2, (7, 1)), (1, 2, (1, 1)),
    (256, 4, (4, 4, 4, 4)), (90, 3, (5, 6, 3)),
])
def test_factorize_balances_the_modes(features, order, expected):
    modes = factorize(features, order)
    assert modes == expected and math.prod(modes) == features


def test_automatic_modes_follow_model_hidden():
    model = tt_model_config(with_tt(max_rank=3, order=2))
    assert [(spec.in_modes, spec.out_modes) for spec in model.layers] == [((8, 8), (4, 4)), ((4, 4), (5, 2))]
    assert all(spec.max_rank == 3 for spec in model.layers)
    assert model.precision == TTPrecision()


def test_given_modes_are_used_and_checked_against_the_layer_sizes():
    config = with_tt(in_modes=((2, 4, 4, 2), (4, 4)), out_modes=((2, 2, 2, 2), (2, 5)))
    assert [spec.in_modes for spec in tt_model_config(config).layers] == [(2, 4, 4, 2), (4, 4)]
    with pytest.raises(ConfigError, match=r"^techniques\.tt\.in_modes\[1\]: product 12 .* != layer 1's inputs 16"):
        tt_model_config(with_tt(in_modes=((8, 8), (4, 3)), out_modes=((4, 4), (5, 2))))
    with pytest.raises(ConfigError, match=r"^techniques\.tt\.in_modes: gives 1 layers; model\.hidden \(16,\) makes 2"):
        tt_model_config(with_tt(in_modes=((8, 8),), out_modes=((4, 4),)))
    with pytest.raises(ConfigError, match=r"^model\.name: techniques\.tt trains an MLP"):
        tt_model_config(with_tt(BASE.replace(model=ModelConfig(name="resnet"))))


@pytest.mark.parametrize("section, message", [
    ({"max_rank": 0}, r"techniques\.tt\.max_rank: must be an int >= 1"),
    ({"max_rank": 2.5}, r"techniques\.tt\.max_rank: must be an int >= 1"),
    ({"order": 9}, r"techniques\.tt\.order: must be an int in \[1, 8\]"),
    ({"in_modes": [[8, 8], [4, 4]]}, r"techniques\.tt\.out_modes: gives 0 layers, in_modes 2"),
    ({"in_modes": [[8, 8]], "out_modes": [[4, 2, 2]]}, r"techniques\.tt\.out_modes\[0\]: needs as many modes"),
    ({"in_modes": [[8, 0]], "out_modes": [[4, 4]]}, r"techniques\.tt\.in_modes\[0\]: must be positive ints"),
    ({"precision": {"core_bits": 1}}, r"techniques\.tt\.precision\.core_bits: must be an int in \[2, 24\]"),
    ({"precision": {"rounding": "up"}}, r"techniques\.tt\.precision\.rounding: must be one of"),
    ({"precision": {"hand_off": "float16"}}, r"techniques\.tt\.precision\.hand_off: must be one of"),
    ({"precision": {"width": 4}}, r"techniques\.tt\.precision\.width: unknown field"),
    ({"prior": {"weight": -1.0}}, r"techniques\.tt\.prior\.weight: must be >= 0"),
    ({"prior": {"threshold": 1.0}}, r"techniques\.tt\.prior\.threshold: must be in \[0, 1\)"),
    ({"prior": {"lambda": 1}}, r"techniques\.tt\.prior\.lambda: unknown field"),
    ({"rank": 4}, r"techniques\.tt\.rank: unknown field"),
])
def test_bad_fields_are_refused_naming_the_field(section, message):
    with pytest.raises(ConfigError, match="^" + message):
        config_from_dict({**RAW, "techniques": {"tt": section}})


def test_python_config_is_validated_by_the_training_config():
    with pytest.raises(ConfigError, match=r"^techniques\.tt\.max_rank:"):
        with_tt(max_rank=-1)
    with pytest.raises(ConfigError, match=r"^techniques\.tt\.prior: must be a table of RankPrior fields"):
        with_tt(prior=3)


def test_toml_tables_become_the_nested_dataclasses():
    config = config_from_dict({**RAW, "techniques": {"tt": {"in_modes": [[8, 8], [4, 4]],
                                                            "out_modes": [[4, 4], [2, 5]],
                                                            "precision": {"grad_bits": 12},
                                                            "prior": {"warmup_epochs": 3}}}})
    tt = config.techniques["tt"]
    assert tt.in_modes == ((8, 8), (4, 4)) and tt.precision == TTPrecision(grad_bits=12)
    assert tt.prior == RankPrior(warmup_epochs=3)
    assert config.to_dict()["techniques"]["tt"]["precision"]["grad_bits"] == 12


def test_the_shipped_example_loads():
    config = load_config(EXAMPLE)
    model = tt_model_config(config)
    assert [(s.in_modes, s.out_modes) for s in model.layers] == [((4, 4, 4), (4, 4, 4)), ((4, 4, 4), (5, 2, 1))]
    assert config.techniques["tt"].prior.prune_from_epoch == 2


def test_pe_widths_follow_the_precision_and_refuse_what_the_pes_cannot_take():
    assert pe_widths(Config()) == {"tt1": {"a_bits": 16, "b_bits": 8}, "tt2": {"a_bits": 16, "b_bits": 4},
                                   "tt3": {"a_bits": 8, "b_bits": 16}}
    narrow = Config(precision=TTPrecision(core_bits=3, activation_bits=6, grad_bits=10))
    assert pe_widths(narrow)["tt2"] == {"a_bits": 10, "b_bits": 3}
    for precision, field in ((TTPrecision(grad_bits=20), "grad_bits"), (TTPrecision(rounding="nearest_away"), "rounding"),
                             (TTPrecision(quantize_intermediates=False), "quantize_intermediates")):
        with pytest.raises(ConfigError, match=rf"^techniques\.tt\.precision\.{field}:"):
            pe_widths(Config(precision=precision))


def test_the_technique_runs_first_and_turns_the_trainer_into_the_tt_trainer():
    from codesign.train.techniques.smd import Config as SmdConfig

    names = [t.name for t in build_techniques({"smd": SmdConfig(p=0.0), "tt": Config()})]
    assert names == ["tt", "smd"]
    trainer = Trainer(with_tt(max_rank=2), progress=False)
    layers = tt_layers(trainer.model)
    assert len(layers) == 2 and all(isinstance(layer, TTLinear) for layer in layers)
    assert [layer.ranks for layer in layers] == [(1, 2, 2, 1), (1, 2, 2, 1)]  # three cores by default
    assert type(trainer.optimizer).__name__ == "Adam"
    assert {id(p) for g in trainer.optimizer.param_groups for p in g["params"]} == \
        {id(p) for p in trainer.model.parameters()}


def test_a_run_with_techniques_tt_is_tt_trainers_run_bit_for_bit():
    """Two epochs with pruning after the first: every core, bias and rank equal to tt_trainer's (same function)."""
    prior = RankPrior(weight=1.0, warmup_epochs=1, threshold=0.9, prune_from_epoch=0)
    config = with_tt(max_rank=3, order=2, prior=prior)
    result = Trainer(config, progress=False).fit()
    reference = tt_trainer(BASE, tt_model_config(config), prior)
    expected = reference.fit()
    assert result.history == expected.history
    report = result.techniques["tt"]
    json.dumps(report)  # results.json takes it as it is
    assert report["final_ranks"] == expected.techniques["tt_rank"]["final_ranks"]
    assert report["prune_events"], "the threshold is high enough to prune"
    assert report["dense_parameters"] == 64 * 16 + 16 + 16 * 10 + 10 > report["parameters"]
    trained = Trainer(config, progress=False)
    trained.fit()
    compared = 0
    for mine, theirs in zip(tt_layers(trained.model), tt_layers(reference.model)):
        for a, b in zip([*mine.cores, mine.bias], [*theirs.cores, theirs.bias]):
            a, b = a.detach().numpy(), b.detach().numpy()
            assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
            compared += a.size
    assert compared == report["parameters"]
