"""The ABVS study's budget (full and smoke), its FP32 base and an ABVS schedule's configuration."""

import dataclasses

import pytest

from codesign.reproduce.abvs_budget import EPSILON, FULL, SMOKE, abvs_config, alpha_for_interval, base_config, budget
from codesign.reproduce.protocol import VALIDATION_FRACTION
from codesign.train.config import ConfigError


def test_the_full_and_smoke_budgets_differ_in_size_only():
    assert budget(False) is FULL and budget(True) is SMOKE and SMOKE.smoke and not FULL.smoke
    assert FULL.epochs == 50 and FULL.scan_fbs == tuple(range(1, 24)) and FULL.fb_gaps == (3, 2, 1)
    assert not set(FULL.preliminary_seeds) & {0, 1, 2}  # never an evaluated seed
    assert base_config(False).optim.epochs == FULL.epochs and base_config(True).optim.epochs == SMOKE.epochs
    assert base_config(False).data.validation_fraction == VALIDATION_FRACTION


@pytest.mark.parametrize("change, field", [({"epochs": 0}, "epochs"), ({"scan_fbs": ()}, "scan_fbs"),
                                           ({"scan_fbs": (0,)}, "scan_fbs"), ({"fb_gaps": (0,)}, "fb_gaps"),
                                           ({"check_intervals": (60,)}, "check_intervals")])
def test_a_budget_that_cannot_run_is_refused(change, field):
    with pytest.raises(ConfigError, match=field):
        dataclasses.replace(FULL, **change)


def test_alpha_gives_the_check_interval_of_eq_1():
    assert alpha_for_interval(50, 4, 3, 6) == pytest.approx(50 / 12)
    assert alpha_for_interval(50, 4, 6, 6) == 1.0  # fixed FB: no checks
    config = abvs_config(3, 6, total_epochs=50, cost_report="", check_every=4)
    assert (config.fb_min, config.fb_max, config.epsilon, config.alpha) == (3, 6, EPSILON, pytest.approx(50 / 12))
