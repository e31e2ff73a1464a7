import json

import pytest

from codesign.reproduce import e2train


@pytest.mark.slow  # 7 s
def test_smoke_reproduction_writes_the_report_with_the_ladder_and_its_breakdown(tmp_path):
    payload = e2train.run(tmp_path, smoke=True, progress=False)
    assert {p.name for p in tmp_path.iterdir()} >= {"results.json", "table.md", "plot.png"}
    stored = json.loads((tmp_path / "results.json").read_text())
    assert [arm["name"] for arm in stored["arms"]] == [*e2train.LADDER, "e2train+swa"]
    assert stored["arms"][0]["baseline"] and payload["targets"][0]["text"].startswith("e2train: >= 80%")
    assert payload["targets"][1]["text"].startswith("e2train+swa: >= 80%")
    # the combination really skips: SMD drops batches and every arm spends less than the baseline
    assert 0.2 < stored["extra"]["smd_drop_rate"][0] < 0.8
    assert all(arm["energy_ratio"]["mean"] < 1 for arm in stored["arms"][1:])
    # the four rungs add up to the full method's saving
    breakdown = stored["extra"]["energy_breakdown"]
    assert set(breakdown) == set(e2train.STEP_NAMES)
    full = next(arm for arm in stored["arms"] if arm["name"] == "e2train")
    assert sum(part["mean"] for part in breakdown.values()) == pytest.approx(1 - full["energy_ratio"]["mean"])
    assert breakdown["quantisation"]["mean"] > 0 and breakdown["SMD"]["mean"] > 0
    assert full["chosen"] == {"optim.lr": e2train.SIGN_LRS[1]}
    assert "E2-Train" in (tmp_path / "table.md").read_text()
    assert stored["readme"]["verdict"].startswith("e2train ") and " / e2train+swa " in stored["readme"]["verdict"]
    # SWA on top of the full combination: PSG's averaging, the tuned sign-gradient grid, compared per seed
    swa_arm = next(arm for arm in stored["arms"] if arm["name"] == "e2train+swa")
    assert swa_arm["techniques"][0]["psg"]["swa"]["averaged_epochs"] == 1
    assert set(swa_arm["techniques"][0]) == {"psg", "smd", "slu"}
    assert stored["tuning"]["e2train+swa"]["trials"] == [] or all(
        t["setting"]["optim.lr"] in e2train.SIGN_LRS for t in stored["tuning"]["e2train+swa"]["trials"]
        if t["widening"] == 0)
    assert swa_arm["chosen"] == {"optim.lr": e2train.SIGN_LRS[1]}
    swa = stored["extra"]["swa"]
    assert swa["differences"] == pytest.approx([swa_arm["per_seed"][0]["test_accuracy"] - full["per_seed"][0]["test_accuracy"]])
