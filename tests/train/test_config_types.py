"""Field types of the training configuration through the Python API: bool is not int, seeds are not negative."""

import pytest

from codesign.train.config import MAX_INT, ConfigError, TrainConfig, check_field_types, config_from_dict, load_config

MLP = {"model": {"name": "mlp", "hidden": [16]}}


@pytest.mark.parametrize("raw, message", [
    ({**MLP, "optim": {"epochs": True}}, r"^optim\.epochs: must be an int"),
    ({**MLP, "optim": {"lr": True}}, r"^optim\.lr: must be > 0"),
    ({**MLP, "seed": -1}, r"^seed: must be an int in \[0, 4294967295\], got -1"),
    ({**MLP, "seed": True}, r"^seed: must be an int"),
    ({**MLP, "data": {"split_seed": -3}}, r"^data\.split_seed: must be an int in \[0,"),
    ({**MLP, "techniques": 5}, r"^techniques: must be a table of technique tables"),
    ({**MLP, "techniques": {"smd": 5}}, r"^techniques\.smd: must be a table"),
    ({**MLP, "techniques": {"cpt": {"cycles": 2**40}}}, rf"^techniques\.cpt\.cycles: must be an int \(\|value\| <= {MAX_INT}\)"),
    ({**MLP, "techniques": {"compress": {"prune_shortcuts": 1}}}, r"^techniques\.compress\.prune_shortcuts: must be a bool"),
    ({**MLP, "techniques": {"abvs": {"timing_fb": True}}}, r"^techniques\.abvs\.timing_fb: "),
    ({**MLP, "techniques": {"tt": {"precision": {"grad_bits": True}}}}, r"^techniques\.tt\.precision\.grad_bits: "),
    ({**MLP, "techniques": {"tt": {"in_modes": [[True, 2]], "out_modes": [[2, 2]]}}}, r"^techniques\.tt\.in_modes"),
    ({"model": {"name": "mlp", "hidden": [True]}}, r"^model\.hidden: must be a list of ints"),
    ([1, 2], r"^configuration: must be a table"),
])
def test_config_from_dict_refuses_wrong_types_naming_the_field(raw, message):
    with pytest.raises(ConfigError, match=message):
        config_from_dict(raw)


def test_the_api_refuses_a_negative_seed_and_a_wrong_table():
    with pytest.raises(ConfigError, match="^seed: "):
        TrainConfig(seed=-1)
    with pytest.raises(ConfigError, match="^model: expected a ModelConfig"):
        TrainConfig(model={"name": "mlp"})
    assert TrainConfig().seed == 0 and config_from_dict({}).model.name == "resnet"  # the API keeps its defaults


def test_check_field_types_leaves_good_values_alone():
    from codesign.train.config import OptimConfig

    check_field_types(OptimConfig, {"epochs": 3, "lr": 1, "schedule": "constant"}, "optim")  # an int is a number
    with pytest.raises(ConfigError, match=r"^optim\.epochs: must be an int .*got True \(a bool\)"):
        check_field_types(OptimConfig, {"epochs": True}, "optim")


def test_a_file_without_a_model_table_or_not_utf8_is_refused_naming_it(tmp_path):
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    with pytest.raises(ConfigError, match=r"empty\.toml: model: missing"):
        load_config(empty)
    latin = tmp_path / "latin.toml"
    latin.write_bytes(b'[model]\nname = "caf\xe9"\n')
    with pytest.raises(ConfigError, match=r"latin\.toml: not UTF-8 text"):
        load_config(latin)


def test_optional_fields_take_none_from_a_dict():
    """A configuration's own to_dict() holds None for unset optional fields (abvs.timing_fb, slu.gate_lr); the
    reproductions rebuild configurations from those dicts, so None must pass the type check."""
    from codesign.train.config import config_from_dict

    for techniques in ({"abvs": {"fb_min": 6, "fb_max": 9, "timing_fb": None}}, {"slu": {"gate_lr": None}}):
        config = config_from_dict({"model": {"name": "mlp"}, "techniques": techniques})
        assert config_from_dict(config.to_dict()) == config
