"""The seeds and splits every study fixes: claim seeds by default, tuning seeds reserved, splits crossed or nested."""

import pytest

from codesign.reproduce.protocol import (CLAIM_SEEDS, SPLIT_SEEDS, TUNING_SEED, TUNING_SEEDS, check_seeds,
                                         crossed_pairs, nested_pairs, split_of, study_seeds, study_splits)


def test_study_seeds_default_to_the_claim_seeds_and_refuse_an_empty_list():
    assert study_seeds(None, smoke=False) == list(CLAIM_SEEDS)
    assert len(CLAIM_SEEDS) >= 3 and len(SPLIT_SEEDS) >= 3  # crossed: at least 9 paired runs per arm
    assert study_splits(CLAIM_SEEDS) == list(SPLIT_SEEDS) and study_splits([0]) == [SPLIT_SEEDS[0]]
    assert study_seeds(None, smoke=True) == [0]
    assert study_seeds((3, 5), smoke=True) == [3, 5]
    # a reproduction with its own claim seeds (tt: 15, csb-utilisation: 8) passes them as the default
    assert study_seeds(None, smoke=False, default=range(15)) == list(range(15))
    assert study_seeds(None, smoke=True, default=range(15)) == [0] and study_seeds([2], False, default=(7,)) == [2]
    with pytest.raises(ValueError, match="at least one seed"):
        study_seeds([], smoke=False)


@pytest.mark.parametrize(("seeds", "reserved", "message"), [
    ([], TUNING_SEEDS, "non-empty"), ([1, 1], TUNING_SEEDS, "without repeats"),
    ([0, TUNING_SEEDS[1]], TUNING_SEEDS, "reserved"), ([TUNING_SEED], (TUNING_SEED,), "reserved"),
])
def test_evaluation_seeds_never_repeat_nor_take_a_tuning_seed(seeds, reserved, message):
    with pytest.raises(ValueError, match=message):
        check_seeds(seeds, reserved)
    assert check_seeds((0, TUNING_SEEDS[1]), reserved=(TUNING_SEED,)) == [0, TUNING_SEEDS[1]]


def test_splits_are_crossed_with_the_seeds_or_nested_in_them():
    assert crossed_pairs([0, 1], [0, 2]) == [(0, 0), (1, 0), (0, 2), (1, 2)]  # splits outer, seeds inner
    assert [split_of(seed) for seed in range(6)] == [0, 1, 2, 0, 1, 2]
    assert nested_pairs([4, 0]) == [(4, 1), (0, 0)]
