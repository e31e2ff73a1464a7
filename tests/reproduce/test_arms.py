"""An arm's tuning trials, and settings named by dotted field, validated like any configuration."""

import pytest

from codesign.reproduce.arms import Arm, with_setting, with_settings, with_split, with_validation
from codesign.reproduce.protocol import VALIDATION_FRACTION
from codesign.train.config import ConfigError
from codesign.train.techniques.psg import Config as PsgConfig
from tests.reproduce.conftest import TINY


def test_settings_are_set_by_dotted_name_and_validated():
    config = TINY.replace(techniques={"psg": PsgConfig()})
    assert with_setting(config, "optim.lr", 0.5).optim.lr == 0.5
    assert with_setting(config, "techniques.psg.beta", 0.1).techniques["psg"].beta == 0.1
    assert with_settings(config, {"optim.lr": 0.5, "seed": 4}).seed == 4
    with pytest.raises(ValueError, match="no technique"):
        with_setting(config, "techniques.smd.p", 0.5)
    with pytest.raises(ValueError, match="cannot tune"):
        with_setting(config, "optimizer.lr", 0.5)
    with pytest.raises(ConfigError, match="techniques.psg.beta"):
        with_setting(config, "techniques.psg.beta", 2.0)


def test_trials_are_the_product_of_the_grids_and_one_empty_trial_without_a_grid():
    arm = Arm("a", TINY, tune={"optim.lr": (0.1, 0.2), "optim.momentum": (0.9,)})
    assert arm.trials() == [{"optim.lr": 0.1, "optim.momentum": 0.9}, {"optim.lr": 0.2, "optim.momentum": 0.9}]
    assert Arm("b", TINY).trials() == [{}]


def test_every_arm_holds_out_validation_and_trains_on_the_split_it_is_given():
    assert with_validation(TINY).data.validation_fraction == VALIDATION_FRACTION
    held = with_validation(TINY.replace(data=TINY.data.__class__(name="synthetic", validation_fraction=0.3)))
    assert held.data.validation_fraction == 0.3  # an arm's own hold-out stays
    assert with_split(TINY, 2).data.split_seed == 2
