"""The ``compressed`` reproduction runs end to end on its smoke budget and writes a complete report."""

import json

import pytest

from codesign.reproduce import compressed


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
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # every arm trained the same epochs; the technique arms differ only in the buffer width
    arms = {arm["name"]: arm for arm in results["arms"]}
    assert {arm["per_seed"][0]["steps"] for arm in arms.values()} == {arms["fp32"]["per_seed"][0]["steps"]}
    techniques = results["settings"]["arms"]
    assert techniques["compressed24"]["compress"]["buffer_bits"] == 24
    assert techniques["buffer16"]["compress"] == techniques["compressed24"]["compress"] | {"buffer_bits": 16}

    # the pruning target is judged on the reported fraction and the same-seed accuracy drop
    (row,) = results["extra"]["per_seed"]["compressed24"]
    drop = arms["fp32"]["per_seed"][0]["test_accuracy"] - arms["compressed24"]["per_seed"][0]["test_accuracy"]
    assert results["extra"]["drop_pt_per_seed"] == [pytest.approx(drop)]
    fraction = row["pruned_fraction_all_conv_kernels"]
    assert results["targets"][0]["met"] == (fraction >= 0.6 and drop <= 1.0)
    assert f"{100 * fraction:.1f} %" in results["targets"][0]["measured"]
    # both technique arms share the warm-up, so they prune the same kernels
    (narrow,) = results["extra"]["per_seed"]["buffer16"]
    assert narrow["pruned_fraction_per_layer"] == row["pruned_fraction_per_layer"]
    # the buffer target reads the lost-update shares and the final training losses of the two technique arms
    expected_met = (narrow["lost_update_fraction"] > row["lost_update_fraction"]
                    and narrow["train_loss_history"][-1] > row["train_loss_history"][-1])
    assert results["targets"][1]["met"] == expected_met
    # the search's validation passes are charged to the run (at this tiny budget they outweigh the savings)
    assert 0 < row["search_share_of_run_macs"] < 1 and row["search_steps"] > 0
    assert results["extra"]["paper_figures"]["table5_training"]["proposed_fixed_8_24"]["gop_per_s_per_w"] == 22.11
