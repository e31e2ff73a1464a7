import pytest

from codesign.train.config import ConfigError, DataConfig, ModelConfig, OptimConfig, TrainConfig, config_from_dict, load_config


@pytest.mark.parametrize(
    "raw, field",
    [
        ({"model": {"name": "vgg"}}, "model.name"),
        ({"model": {"depth": 9}}, "model.depth"),
        ({"model": {"name": "convnet", "channels": []}}, "model.channels"),
        ({"model": {"name": "convnet", "channels": [8, 8], "strides": [1]}}, "model.strides"),
        ({"model": {"name": "convnet", "channels": [8], "strides": [3]}}, "model.strides"),
        ({"model": {"name": "convnet", "block_channels": [8, 8], "block_strides": [1]}}, "model.block_strides"),
        ({"model": {"name": "convnet", "block_channels": [0], "block_strides": [1]}}, "model.block_channels"),
        ({"model": {"name": "resnet", "block_channels": [8], "block_strides": [1]}}, "model.block_channels"),
        ({"optim": {"epochs": 0}}, "optim.epochs"),
        ({"optim": {"lr": -1.0}}, "optim.lr"),
        ({"optim": {"momentum": 1.0}}, "optim.momentum"),
        ({"data": {"name": "cifar10"}}, "data.name"),
        ({"data": {"test_fraction": 1.5}}, "data.test_fraction"),
        ({"data": {"colour": True}}, "data.colour"),
        ({"techniques": {"dropout": {}}}, "techniques.dropout"),
        ({"learning_rate": 0.1}, "learning_rate"),
    ],
)
def test_bad_fields_are_named(raw, field):
    with pytest.raises(ConfigError, match=f"^{field}"):
        config_from_dict(raw)


def test_toml_round_trip(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('seed = 3\n[model]\nname = "mlp"\nhidden = [32, 16]\n[optim]\nepochs = 2\n')
    config = load_config(path)
    assert config == TrainConfig(seed=3, model=ModelConfig(name="mlp", hidden=(32, 16)), optim=OptimConfig(epochs=2))
    assert config.to_dict()["model"]["hidden"] == (32, 16)
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "absent.toml")
    (tmp_path / "bad.toml").write_text("seed = = 1")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(tmp_path / "bad.toml")


def test_dataclass_construction_validates_too():
    with pytest.raises(ConfigError, match="optim.batch_size"):
        TrainConfig(optim=OptimConfig(batch_size=0))
    with pytest.raises(ConfigError, match="data.synthetic_samples"):
        TrainConfig(data=DataConfig(synthetic_samples=3))


def test_fields_added_later_stay_out_of_a_recorded_configuration_at_their_defaults():
    """data.path and data.pad_to came after runs were cached: at their defaults a configuration's record (and so
    every cached run's key) is what it was before them; set, they are recorded."""
    from codesign.train.config import DataConfig, TrainConfig, config_from_dict, plain

    recorded = TrainConfig().to_dict()["data"]
    assert set(recorded) == {"name", "test_fraction", "split_seed", "synthetic_samples", "validation_fraction"}
    padded = TrainConfig(data=DataConfig(name="mnist", pad_to=32)).to_dict()
    assert padded["data"]["pad_to"] == 32 and "path" not in padded["data"]
    assert config_from_dict(padded).data == DataConfig(name="mnist", pad_to=32)
    assert plain(DataConfig(name="file", path="x.npz"))["path"] == "x.npz"
    assert set(TrainConfig().to_dict()["model"]) == {"name", "depth", "width", "hidden"}  # convnet's came later
    conv = TrainConfig(model=ModelConfig(name="convnet", channels=(8,), strides=(2,))).to_dict()["model"]
    assert (conv["channels"], conv["strides"]) == ((8,), (2,)) and config_from_dict({"model": conv}).model.channels == (8,)
    assert "block_channels" not in conv  # residual blocks came later still
    res = ModelConfig(name="convnet", channels=(8,), strides=(1,), block_channels=(8, 16), block_strides=(1, 2))
    assert config_from_dict({"model": TrainConfig(model=res).to_dict()["model"]}).model.blocks == ((8, 1), (16, 2))
