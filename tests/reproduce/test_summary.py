"""Per arm, paired against the same-run baseline: intervals of the differences and ratios, and the TOST verdict."""

from dataclasses import asdict

from codesign.reproduce.cost import PaperAccounting
from codesign.reproduce.stats import bootstrap_interval, tost
from codesign.reproduce.summary import committed_arm, mean_std, summarize


def test_summary_pairs_each_seed_and_split_with_the_baseline_and_judges_by_tost(study):
    _, arms, runs, tuning = study
    paper = PaperAccounting(key="bitops", name="BitOPs", citation="test")
    base, fixed = summarize(arms, runs, tuning, margin_pt=30.0, paper=paper)
    differences = [f.test_accuracy - b.test_accuracy for f, b in zip(runs["fixed"], runs["base"])]
    assert fixed.accuracy_difference == bootstrap_interval(differences).as_dict()
    assert fixed.accuracy_tost == tost(differences, 30.0).as_dict() and fixed.verdict == tost(differences, 30.0).text()
    assert [(row["seed"], row["split_seed"]) for row in fixed.per_seed] == \
        [(r.config["seed"], r.config["data"]["split_seed"]) for r in runs["base"]]
    assert len(fixed.per_seed) == 9
    # each run records its test passes and its costs with every test pass charged (one epoch: the same)
    assert all(row["test_passes"] == len(r.history) == 1 for row, r in zip(fixed.per_seed, runs["fixed"]))
    assert all(row[f"{key}_every_test"] == row[key] for row in fixed.per_seed for key in ("energy_pj", "bitops"))
    # the fixed-point arm spends fewer BitOPs and less energy than float32 however the passes are charged
    assert fixed.energy_ratio["mean"] < 1 and fixed.paper_ratio["mean"] < 1 and fixed.training_energy_ratio["mean"] < 1
    assert fixed.paper_ratio == fixed.bitops_ratio and fixed.paper_accounting["name"] == "BitOPs"
    assert base.accuracy_difference["mean"] == 0 and base.verdict == "baseline" and base.accuracy_tost == {}
    assert fixed.chosen == tuning["fixed"]["chosen"]
    # a written report's arm reads back as the summary it was written from (an older report's missing fields
    # take their defaults)
    payload = {"arms": [asdict(base), {k: v for k, v in asdict(fixed).items() if k != "accuracy_difference_t"}]}
    assert committed_arm(payload, "base") == base
    assert committed_arm(payload, "fixed").accuracy_difference_t == {}


def test_mean_and_spread_of_no_one_and_many_values():
    assert mean_std([2.0]) == (2.0, 0.0) and mean_std([1.0, 3.0]) == (2.0, 2 ** 0.5)
    assert all(value != value for value in mean_std([]))  # NaN: no values, no mean
