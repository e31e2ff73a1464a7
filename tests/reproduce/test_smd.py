"""The ``smd`` reproduction runs end to end on its smoke budget and writes a complete, self-consistent report."""

import json

import pytest

from codesign.reproduce import smd


@pytest.mark.slow
def test_smoke_reproduction_writes_the_report(tmp_path):
    payload = smd.run(tmp_path, smoke=True, progress=False)
    results = json.loads((tmp_path / "results.json").read_text())
    assert results == json.loads(json.dumps(payload))
    names = ["smb", "smd_x4/3", "smb_x2/3", "smd_x2"]
    assert [arm["name"] for arm in results["arms"]] == names
    assert [arm["baseline"] for arm in results["arms"]] == [True, False, False, False]
    table = (tmp_path / "table.md").read_text()
    assert "| smb (baseline)" in table and all(f"| {name} |" in table for name in names[1:])
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Table 1" in results["paper"]["citation"] and len(results["targets"]) == 1

    # the SMD arm is scheduled for 4/3 of the baseline's epochs (3 -> 4), the same-energy SMB arm for 2/3 (3 -> 2)
    assert results["settings"]["epochs_by_arm"] == {"smb": 3, "smd_x4/3": 4, "smb_x2/3": 2, "smd_x2": 6}
    assert results["extra"]["expected_energy_ratio"]["smd_x4/3"] == pytest.approx(2 / 3)
    arms = {arm["name"]: arm for arm in results["arms"]}
    smd_run, base_run = arms["smd_x4/3"]["per_seed"][0], arms["smb"]["per_seed"][0]
    # the measured skip rate is the trainer's skipped-step count over the scheduled steps
    assert results["extra"]["measured_skip_rate"]["smd_x4/3"] == [smd_run["skipped_steps"] / smd_run["steps"]]
    assert smd_run["steps"] == 4 / 3 * base_run["steps"]
    assert arms["smd_x4/3"]["energy_ratio_mean"] == pytest.approx(smd_run["energy_pj"] / base_run["energy_pj"])
    # SMB over 2/3 of the epochs trains at exactly 2/3 of the baseline's cost: the same batches, fewer of them
    assert arms["smb_x2/3"]["training_energy_ratio"]["mean"] == pytest.approx(2 / 3, rel=1e-12)
    # its validation passes (one per epoch, 2 against 3) and the one test pass are charged too, each once: the
    # charged ratio lies between the evaluation passes' ratio (2 x val + test) / (3 x val + test) and 2/3
    assert 2 / 3 < arms["smb_x2/3"]["energy_ratio_mean"] < 1
    target = results["targets"][0]
    expected_met = (abs(arms["smd_x4/3"]["energy_ratio_mean"] - 2 / 3) <= 0.05
                    and arms["smd_x4/3"]["accuracy_tost"]["equivalent"])
    assert target["met"] == expected_met and results["all_targets_met"] == expected_met
