"""The ``compressed`` reproduction runs end to end on its smoke budget and writes a complete report."""

import json

import pytest

from codesign.reproduce import compressed
from codesign.reproduce.stats import bootstrap_interval


@pytest.mark.slow
def test_smoke_reproduction_writes_the_report(tmp_path):
    payload = compressed.run(tmp_path, smoke=True, progress=False)
    results = json.loads((tmp_path / "results.json").read_text())
    assert results == json.loads(json.dumps(payload))
    assert [arm["name"] for arm in results["arms"]] == ["fp32", "compressed24", "buffer16"]
    assert [arm["baseline"] for arm in results["arms"]] == [True, False, False]
    assert "Tables 3, 4 and 5" in results["paper"]["citation"] and len(results["targets"]) == 2
    table = (tmp_path / "table.md").read_text()
    assert all(f"| {name}" in table for name in ("fp32 (baseline)", "compressed24", "buffer16"))
    assert "## Tuning" in table
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # every arm trained the same epochs and had the same learning-rate trials, chosen on validation accuracy
    arms = {arm["name"]: arm for arm in results["arms"]}
    assert {arm["per_seed"][0]["steps"] for arm in arms.values()} == {arms["fp32"]["per_seed"][0]["steps"]}
    for name, arm in arms.items():
        trials = results["tuning"][name]["trials"]
        assert [t["setting"]["optim.lr"] for t in trials if t["widening"] == 0] == list(compressed.SMOKE_LEARNING_RATES)
        assert len(trials) == len(compressed.SMOKE_LEARNING_RATES) + len(results["tuning"][name]["widenings"])  # one per widening
        assert arm["chosen"] == max(trials, key=lambda t: t["validation_accuracy"])["setting"]
    techniques = results["settings"]["arms"]
    assert techniques["compressed24"]["compress"]["buffer_bits"] == 24
    assert techniques["buffer16"]["compress"] == techniques["compressed24"]["compress"] | {"buffer_bits": 16}

    # the pruning search read the held-out validation split, not a slice of the training data
    (row,) = results["extra"]["per_seed"]["compressed24"]
    assert row["validation_reference"]["source"] == "held-out validation split"
    assert 0 < row["validation_reference"]["samples"] < 120
    # kernels of 3x3 convs and of 1x1 shortcuts are counted apart; they add up to all conv kernels
    groups = row["by_kernel_size"]
    kxk, pointwise = groups["kxk_conv"], groups["pointwise_conv"]
    assert kxk["weights"] == 9 * kxk["kernels"] and pointwise["weights"] == pointwise["kernels"] > 0
    assert kxk["pruned_weights"] == 9 * kxk["pruned_kernels"]
    assert row["pruned_fraction_all_conv_kernels"] == pytest.approx(
        (kxk["pruned_kernels"] + pointwise["pruned_kernels"]) / (kxk["kernels"] + pointwise["kernels"]))
    assert row["pruned_fraction_conv_weights"] == pytest.approx(
        (kxk["pruned_weights"] + pointwise["pruned_weights"]) / (kxk["weights"] + pointwise["weights"]))
    assert row["pruned_fraction_all_weights"] < row["pruned_fraction_conv_weights"] or kxk["pruned_kernels"] == 0
    assert 0 <= row["forward_mac_fraction_removed"] < 1
    pruning = results["extra"]["pruning"]["compressed24"]
    assert pruning["pruned_fraction_kxk_kernels"] == bootstrap_interval([kxk["kernel_fraction"]]).as_dict()

    # the pruning target reads the 3x3 share and the paired accuracy interval against fp32
    drop = arms["compressed24"]["per_seed"][0]["test_accuracy"] - arms["fp32"]["per_seed"][0]["test_accuracy"]
    assert arms["compressed24"]["accuracy_difference"]["mean"] == pytest.approx(drop)
    assert results["targets"][0]["met"] == (kxk["kernel_fraction"] >= 0.6 and drop >= -1.0)
    assert f"{100 * kxk['kernel_fraction']:.1f} %" in results["targets"][0]["measured"]
    # the buffer ablation is paired per seed: buffer16 - buffer24 of the lost-update share and the final loss
    (narrow,) = results["extra"]["per_seed"]["buffer16"]
    ablation = results["extra"]["buffer_ablation"]
    lost = 100 * (narrow["lost_update_fraction"] - row["lost_update_fraction"])
    loss = narrow["train_loss_history"][-1] - row["train_loss_history"][-1]
    assert ablation["lost_update_share_pt"]["difference_per_seed"] == [pytest.approx(lost)]
    assert ablation["final_train_loss"]["difference_per_seed"] == [pytest.approx(loss)]
    assert results["targets"][1]["met"] == (lost > 0 and loss > 0)
    # the search's validation passes are charged to the run (at this tiny budget they outweigh the savings)
    assert 0 < row["search_share_of_run_macs"] < 1 and row["search_steps"] > 0
    assert results["extra"]["paper_figures"]["table5_training"]["proposed_fixed_8_24"]["gop_per_s_per_w"] == 22.11
    assert results["readme"]["verdict"].startswith("pruning ")
