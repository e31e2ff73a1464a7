"""The ``cpt`` reproduction runs end to end on its smoke budget and writes a complete report."""

import json

import pytest

from codesign.reproduce import cpt
from codesign.reproduce.protocol import TUNING_SEED
from codesign.reproduce.stats import bootstrap_interval


@pytest.mark.slow
def test_smoke_reproduction_writes_the_report(tmp_path):
    payload = cpt.run(tmp_path, smoke=True, progress=False)
    results = json.loads((tmp_path / "results.json").read_text())
    assert results == json.loads(json.dumps(payload))
    arms = {arm["name"]: arm for arm in results["arms"]}
    assert list(arms) == ["static8", "cpt_ceil", "cpt_rint"]
    assert [arm["baseline"] for arm in results["arms"]] == [True, False, False]
    assert results["paper"]["citation"].endswith("Table 2")
    table = (tmp_path / "table.md").read_text()
    assert all(f"| {name}" in table for name in ("static8 (baseline)", "cpt_ceil", "cpt_rint"))
    assert "## Tuning" in table
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # every arm had the same learning-rate trials at the tuning seed, read on validation accuracy only
    for name in arms:
        trials = results["tuning"][name]["trials"]
        assert [t["setting"]["optim.lr"] for t in trials if t["widening"] == 0] == list(cpt.SMOKE_LEARNING_RATES)
        assert len(trials) == len(cpt.SMOKE_LEARNING_RATES) + len(results["tuning"][name]["widenings"])  # one per widening
        best = max(trials, key=lambda t: t["validation_accuracy"])
        assert arms[name]["chosen"] == results["tuning"][name]["chosen"]
        assert arms[name]["chosen"]["optim.lr"] == best["setting"]["optim.lr"]
        assert arms[name]["validation_accuracy_mean"] is not None
    assert TUNING_SEED not in results["seeds"]

    # one target per rounding rule, judged on the paired intervals against the same-seed static8 run
    assert [t["text"].split(" ")[0] for t in results["targets"]] == ["cpt_ceil", "cpt_rint"]
    for target, name in zip(results["targets"], ("cpt_ceil", "cpt_rint")):
        arm = arms[name]
        ratio = arm["per_seed"][0]["bitops"] / arms["static8"]["per_seed"][0]["bitops"]
        assert arm["bitops_ratio"]["mean"] == pytest.approx(ratio, rel=1e-12)
        delta = arm["per_seed"][0]["test_accuracy"] - arms["static8"]["per_seed"][0]["test_accuracy"]
        assert arm["accuracy_difference"] == bootstrap_interval([delta]).as_dict()
        # met needs the whole BitOPs interval under the target and accuracy equivalent by the arm's TOST
        assert target["met"] == (ratio <= cpt.TARGET_RATIO and arm["accuracy_tost"]["equivalent"] is True)
        assert results["extra"]["target_met"][name] == target["met"]
    # CPT's training (B_min <= 8) costs no more BitOPs than static 8 bit; the range test's held-batch forwards
    # and probe steps come on top (at this tiny budget they are a large share)
    (ceil_row,) = results["extra"]["range_test"]["cpt_ceil"]
    training_bitops = arms["cpt_ceil"]["bitops_mean"] * (1 - ceil_row["held_share_of_run_bitops"]
                                                         - ceil_row["probe_share_of_run_bitops"])
    assert training_bitops <= arms["static8"]["bitops_mean"]
    # the range test (branched: probe steps outside the run) read a batch of the validation split and picked a
    # width the schedule then used from step 0
    for name in ("cpt_ceil", "cpt_rint"):
        (row,) = results["extra"]["range_test"][name]
        assert row["mode"] == "branched" and row["probe_steps"] == len(row["candidates_tried"])
        assert row["probe_forward_macs"] > 0 and row["probe_share_of_run_bitops"] > 0
        assert row["held_from"] == "validation" and row["held_samples"] > 0
        assert 2 <= row["min_bits"] <= 8 and row["held_forward_macs"] > 0
        assert str(row["min_bits"]) in row["steps_by_forward_bits"]
    assert results["readme"]["verdict"].startswith("ceil ")


def test_the_readme_label_names_the_bit_widths_the_range_test_chose():
    range_tests = {"cpt_ceil": [{"min_bits": 4}] * 8 + [{"min_bits": 5}],
                   "cpt_rint": [{"min_bits": 3}] * 2 + [{"min_bits": 4}] * 7}
    assert cpt.readme_row_label(range_tests) == (
        "`cpt` (FW B_min–8 bit / BW 8 vs static 8-bit, ResNet-8; B_min chosen by the range test: ceil: 4 in 8, 5 in 1 "
        "of 9 runs; rint: 3 in 2, 4 in 7 of 9 runs)")
    assert "3–8" not in cpt.readme_label({"extra": {"range_test": {"cpt_ceil": [{"min_bits": 4}] * 3}}})
