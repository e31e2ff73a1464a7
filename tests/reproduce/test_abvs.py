"""The ABVS reproduction end to end in smoke mode: the validation-read scans, tuned arms, delay sensitivity, report."""

from __future__ import annotations

import json

import pytest

from codesign.energy.abvs_cost import PER_CELL_DELAYS, UNIFORM_DELAYS
from codesign.reproduce import abvs
from codesign.reproduce.abvs_budget import budget
from codesign.reproduce.abvs_report import SAVING_TARGET, headline


@pytest.mark.slow
def test_smoke_reproduction_writes_the_report(tmp_path):
    payload = abvs.run(tmp_path, smoke=True, progress=False)
    for name in ("results.json", "table.md", "plot.png", "fb_trace.png"):
        assert (tmp_path / name).is_file(), name
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved == json.loads(json.dumps(payload))
    assert saved["name"] == "abvs" and saved["seeds"] == [0]
    extra = saved["extra"]
    lsfb, fb_min = extra["least_sufficient_fb"], extra["fb_min"]
    names = [arm["name"] for arm in saved["arms"]]
    assert names == ["fp32", f"fixed_fb{lsfb}", f"abvs_fb{fb_min}to{lsfb}"]
    assert [arm["baseline"] for arm in saved["arms"]] == [True, False, False]
    table = (tmp_path / "table.md").read_text()
    assert all(name in table for name in names) and "## Tuning" in table

    # the scans read validation accuracy of their own preliminary seeds, never an evaluated seed
    assert extra["preliminary"]["reads"] == extra["schedule_selection"]["reads"] == "validation accuracy"
    assert not set(extra["preliminary"]["seeds"]) & set(saved["seeds"])
    assert saved["settings"]["validation_fraction"] > 0
    # every arm spent as many preliminary runs on its own choice, on the same preliminary seeds, read on validation
    runs = extra["preliminary_search_runs"]
    assert set(runs) == set(names) and len(set(runs.values())) == 1 and runs[names[2]] > 0
    for name in names[:2]:
        search = extra["baseline_searches"][name]
        assert search["reads"] == "validation accuracy" and search["seeds"] == extra["schedule_selection"]["seeds"]
        assert search["chosen"] == max(search["candidates"], key=lambda c: c["validation_accuracy_mean"])["settings"]
    # every arm had the same learning-rate trials, chosen on validation accuracy
    for arm in saved["arms"]:
        trials = saved["tuning"][arm["name"]]["trials"]
        own = [t["setting"]["optim.lr"] for t in trials if t["widening"] == 0]
        assert own == list(budget(smoke=True).learning_rates)  # then one more per widening of the grid, each recorded
        assert len(trials) == len(own) + len(saved["tuning"][arm["name"]]["widenings"])
        assert arm["chosen"] == max(trials, key=lambda t: t["validation_accuracy"])["setting"]
    # the FB controller of the evaluated ABVS run logged validation accuracy (a fraction), not test accuracy
    abvs_arm = saved["arms"][2]
    report = abvs_arm["techniques"][0]["abvs"]
    assert report["accuracy_trace"][-1] * 100 == pytest.approx(abvs_arm["per_seed"][0]["validation_accuracy"])
    assert len(extra["fb_traces"][0]) == saved["settings"]["epochs"]

    # smoke runs never start Yosys: the embedded fallback table prices the MACs, and the report says so
    assert extra["cost_report"]["path"] == "" and "fallback" in extra["cost_report"]["status"]
    assert extra["energy_model"]["source"].startswith("fallback table")
    assert extra["energy_model"]["delay_model"]["name"] == PER_CELL_DELAYS["xc7"].name
    assert len(saved["targets"]) == 2 and saved["paper"]["citation"].startswith("T. Cheng")
    # the Eq. (2) saving from the ledger equals the one recomputed from the FB trace and the energy model
    saving = extra["eq2_saving_vs_fixed"]["per_seed"][0]
    assert abs((1 - extra["eq2_ratio_vs_fixed_from_fb_traces"][0]) - saving) < 1e-9
    assert saved["targets"][0]["met"] == (saving >= SAVING_TARGET)
    # the delay sensitivity: uniform, per-cell, and each cell type x0.5 / x1.5; the per-cell entry is the ledger's
    delays = extra["delay_sensitivity"]
    assert {"uniform (a DSP counts like a LUT)", "per-cell", "per-cell, dsp x0.5", "per-cell, lut x1.5",
            "per-cell, carry x0.5"} <= set(delays)
    assert delays["per-cell"]["per_seed"] == [pytest.approx(saving, abs=1e-9)]
    assert delays["uniform (a DSP counts like a LUT)"]["delay_ns"]["dsp"] == UNIFORM_DELAYS.dsp
    assert payload["all_targets_met"] == saved["all_targets_met"]
    assert saved["readme"]["verdict"].startswith("saving ")
    assert headline(saved).startswith("Eq. (2) saving vs fixed FB ") and abvs.headline is headline
