"""What the ``tt`` reproduction trains: the TT arms from one large start, equal tuning budgets, memory in bits."""

from dataclasses import replace

import pytest

from codesign.reproduce import tt_budget as b
from codesign.reproduce.protocol import VALIDATION_FRACTION
from codesign.train.tt import TTPrecision


def test_dense_bits_count_every_weight_and_bias_at_32_bits():
    assert b.dense_bits(b.budget(smoke=False)) == 32 * (64 * 256 + 256 + 256 * 256 + 256 + 256 * 10 + 10)


def test_the_four_table1_arms_share_one_large_start_and_differ_in_precision_and_prior():
    full = b.budget(smoke=False)
    specs = {arm: b.arm_spec(arm) for arm in b.TT_ARMS}
    assert {spec.max_ranks for spec in specs.values()} == {None}  # the budget's large start, for every arm
    table1 = [specs[arm] for arm in b.TT_ARMS
              if arm not in (b.FIXED_PRIOR_DENSE, b.FIXED_PRIOR_TRACKED, b.FIXED_PRIOR_EXACT_HAND_OFF)]
    assert sorted((spec.lowp, spec.prior) for spec in table1) == [(False, False), (False, True), (True, False),
                                                                  (True, True)]
    assert {spec.route for spec in table1} == {"direct"} and {spec.scale_rule for spec in table1} == {"exact"}
    # the proposal again, its core gradients through the dense weight gradient; paired against it
    dense = specs[b.FIXED_PRIOR_DENSE]
    assert (dense.lowp, dense.prior, dense.route, dense.scale_rule) == (True, True, "dense", "exact")
    assert b.ROUTE_PAIRS == ((b.FIXED_PRIOR_DENSE, b.FIXED_PRIOR),)
    # the proposal again, its scales tracked from earlier steps (paper 003, Sec. 3.3); paired against it
    tracked = specs[b.FIXED_PRIOR_TRACKED]
    assert (tracked.lowp, tracked.prior, tracked.route, tracked.scale_rule) == (True, True, "direct", "tracked")
    assert b.SCALE_RULE_PAIRS == ((b.FIXED_PRIOR_TRACKED, b.FIXED_PRIOR),)
    # the tracked arm again, its layers' values passed on exactly; paired against it
    assert specs[b.FIXED_PRIOR_EXACT_HAND_OFF] == replace(tracked, hand_off="exact")
    assert {spec.hand_off for arm, spec in specs.items() if arm != b.FIXED_PRIOR_EXACT_HAND_OFF} == {"float32"}
    assert b.HAND_OFF_PAIRS == ((b.FIXED_PRIOR_EXACT_HAND_OFF, b.FIXED_PRIOR_TRACKED),)
    assert full.hand_picked_ranks == b.HAND_PICKED_RANKS == ((4, 4, 4), (4, 2, 4), (4, 4, 4))
    # rank 8 where the modes allow it; the last layer's first rank is cut to 1 * 4 by its (1, 4) first core
    assert b.initial_ranks(full) == {"layers.0": [1, 8, 8, 8, 1], "layers.1": [1, 8, 8, 8, 1],
                                     "layers.2": [1, 4, 8, 8, 1]}
    with pytest.raises(ValueError, match="arm"):
        b.arm_spec("tt-other")


def test_each_arm_trains_with_the_precision_of_its_route_and_scale_rule_and_nothing_else():
    # the arms trained before the scale rule existed keep the precision they trained with
    assert b.arm_spec(b.FIXED_PRIOR).precision() == TTPrecision()
    assert b.arm_spec(b.FIXED_PLAIN).precision() == TTPrecision()
    assert b.arm_spec(b.FIXED_PRIOR_DENSE).precision() == TTPrecision(core_grad_route="dense")
    assert b.arm_spec(b.FLOAT_PRIOR).precision() is None and b.arm_spec(b.FLOAT_PLAIN).precision() is None
    # the tracked arm: the proposal's precision with the tracked rule at its default momentum, nothing else changed
    tracked = b.arm_spec(b.FIXED_PRIOR_TRACKED).precision()
    assert tracked.scale_rule == "tracked" and tracked.scale_momentum == TTPrecision().scale_momentum == 0.9
    assert replace(tracked, scale_rule="exact") == TTPrecision()
    assert b.arm_spec(b.FIXED_PRIOR_EXACT_HAND_OFF).precision() == replace(tracked, hand_off="exact")


def test_memory_of_ranks_counts_4_bit_cores_and_8_bit_biases():
    full = b.budget(smoke=False)
    ranks = b.initial_ranks(full, b.HAND_PICKED_RANKS)
    # cores r_{k-1} m_k n_k r_k: layer 0 32+256+256+32, layer 1 64+128+128+64, layer 2 16+64+128+80; biases 256+256+10
    cores = (32 + 256 + 256 + 32) + (64 + 128 + 128 + 64) + (16 + 64 + 128 + 80)
    assert b.ranks_memory_bits(full, ranks, lowp=True) == 4 * cores + 8 * 522
    assert b.ranks_memory_bits(full, ranks, lowp=False) == 32 * cores + 32 * 522
    assert b.dense_bits(full) / b.ranks_memory_bits(full, ranks, lowp=True) == pytest.approx(296.69, abs=0.01)
    # the large start is far from the target: the prior has to prune to get there
    assert b.dense_bits(full) / b.ranks_memory_bits(full, b.initial_ranks(full), lowp=True) < 120


def test_both_arms_get_the_same_number_of_tuning_trials_and_every_run_holds_out_validation():
    full = b.budget(smoke=False)
    assert len(full.baseline_grid) == len(full.tt_grid) >= 4
    assert full.data.validation_fraction == VALIDATION_FRACTION > 0
    with pytest.raises(ValueError, match="as many trials"):
        replace(full, tt_grid=full.tt_grid[:-1])
    with pytest.raises(ValueError, match="warm-up"):
        replace(full, tt_grid=tuple(replace(t, warmup_epochs=full.optim.epochs) for t in full.tt_grid))
    with pytest.raises(ValueError, match="validation"):
        replace(full, data=replace(full.data, validation_fraction=0.0))
    config = b.train_config(full, 3, 1e-2, split_seed=2)
    assert config.data.validation_fraction == VALIDATION_FRACTION and config.data.split_seed == 2


def test_bad_trials_are_refused():
    with pytest.raises(ValueError, match="weight"):
        b.TTTrial(lr=1e-2, prior_weight=-1.0, threshold=0.1, warmup_epochs=1)
    with pytest.raises(ValueError, match="lr"):
        b.BaselineTrial(lr=0.0, weight_decay=0.0)


def test_the_budget_digest_names_every_field_a_run_trains_with():
    smoke = b.budget(smoke=True)
    assert b.budget_digest(smoke) == b.budget_digest(b.budget(smoke=True)) != b.budget_digest(b.budget(smoke=False))
    assert b.budget_digest(replace(smoke, hidden=(17,))) != b.budget_digest(smoke)
