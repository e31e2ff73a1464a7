"""The ``slu`` reproduction runs end to end on its smoke budget and writes a complete, self-consistent report."""

import json

import pytest

from codesign.reproduce import slu


@pytest.mark.slow
def test_smoke_reproduction_writes_the_report(tmp_path):
    payload = slu.run(tmp_path, smoke=True, progress=False)
    results = json.loads((tmp_path / "results.json").read_text())
    assert results == json.loads(json.dumps(payload))
    names = ["fp32", "slu_20", "slu_40", "slu_60", "sd_40"]
    assert [arm["name"] for arm in results["arms"]] == names
    assert [arm["baseline"] for arm in results["arms"]] == [True, False, False, False, False]
    table = (tmp_path / "table.md").read_text()
    assert "| fp32 (baseline)" in table and all(f"| {name} |" in table for name in names[1:])
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Table 3" in results["paper"]["citation"] and len(results["targets"]) == 3

    arms = {arm["name"]: arm for arm in results["arms"]}
    for name, target_skip in (("slu_20", 0.2), ("slu_40", 0.4), ("slu_60", 0.6)):
        skip = results["extra"]["skip"][name]
        assert skip["target_skip"] == target_skip and results["settings"]["slu"][name]["target_skip"] == target_skip
        reported = arms[name]["techniques"][0]["slu"]
        assert skip["train_skip_per_seed"] == [reported["measured_train_skip_ratio"]]
        assert 0 < skip["gate_energy_share_mean"] < 0.05  # the gates are charged, and cheap
    sd = results["extra"]["stochastic_depth"]
    assert sd["final_survival"] == pytest.approx(1 - 0.4 * 24 / 13)  # ResNet-14: expected drop 40 %, slu_40's target
    assert sd["expected_train_drop_ratio"] == pytest.approx(0.4)
    assert 0 < sd["train_drop_per_seed"][0] < 1
    assert 1 - arms["sd_40"]["energy_ratio"]["mean"] > 0  # dropped blocks are not charged
    assert sd["slu_40_minus_sd_40"] == pytest.approx(
        [arms["slu_40"]["per_seed"][0]["test_accuracy"] - arms["sd_40"]["per_seed"][0]["test_accuracy"]])
    assert "sd_40" in results["readme"]["measured"]
    assert any("not on energy" in note and "per seed" in note for note in results["notes"])
    for target, name in zip(results["targets"], names[1:4]):
        skip, arm = results["extra"]["skip"][name], arms[name]
        expected = abs(skip["train_skip_mean"] - skip["target_skip"]) <= 0.05 and arm["accuracy_difference"]["high"] >= 0
        assert target["met"] == expected
