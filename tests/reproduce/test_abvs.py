"""The ABVS reproduction in smoke mode: three arms, the least-sufficient-FB scan, targets and report files."""

from __future__ import annotations

import json

from codesign.reproduce import abvs


def test_smoke_reproduction_writes_the_report(tmp_path):
    payload = abvs.run(tmp_path, smoke=True, progress=False)
    for name in ("results.json", "table.md", "plot.png", "fb_trace.png"):
        assert (tmp_path / name).is_file(), name
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["name"] == "abvs" and saved["seeds"] == [0]
    extra = saved["extra"]
    lsfb, fb_min = extra["least_sufficient_fb"], extra["fb_min"]
    names = [arm["name"] for arm in saved["arms"]]
    assert names == ["fp32", f"fixed_fb{lsfb}", f"abvs_fb{fb_min}to{lsfb}"]
    assert [arm["baseline"] for arm in saved["arms"]] == [True, False, False]
    table = (tmp_path / "table.md").read_text()
    assert all(name in table for name in names)
    # smoke runs never start Yosys: the embedded fallback table prices the MACs, and the report says so
    assert extra["cost_report"]["path"] == "" and "fallback" in extra["cost_report"]["status"]
    assert extra["energy_model"]["source"].startswith("fallback table")
    assert len(saved["targets"]) == 2 and saved["paper"]["citation"].startswith("T. Cheng")
    assert "Fig. 10a" in saved["paper"]["citation"]
    # the Eq. (2) saving from the ledger equals the one recomputed from the FB trace and the energy model
    saving = extra["eq2_saving_vs_fixed"]["per_seed"][0]
    assert abs((1 - extra["eq2_ratio_vs_fixed_from_fb_traces"][0]) - saving) < 1e-9
    assert len(extra["fb_traces"][0]) == saved["settings"]["epochs"]
    assert payload["all_targets_met"] == saved["all_targets_met"]
