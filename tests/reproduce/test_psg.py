"""The PSG reproduction runs end to end on a smoke budget and writes its three reports with every arm."""

import json

from codesign.reproduce import psg


def test_smoke_reproduction_writes_the_reports_with_all_arms(tmp_path):
    payload = psg.run(tmp_path, smoke=True, progress=False)
    results = json.loads((tmp_path / "results.json").read_text())
    assert results == json.loads(json.dumps(payload))
    names = [arm["name"] for arm in results["arms"]]
    assert names == ["FP32 SGD", "PSG", "PSG+SWA"]
    assert [arm["baseline"] for arm in results["arms"]] == [True, False, False]
    baseline, psg_arm, swa_arm = results["arms"]
    assert baseline["energy_ratio_mean"] == 1.0
    assert 0 < psg_arm["energy_ratio_mean"] < 1  # 8/16-bit operands and predictors cost less than FP32
    fractions = results["extra"]["predicted_fraction"]
    assert set(fractions) == {"PSG", "PSG+SWA"} and 0 < fractions["PSG"]["overall_mean"] <= 1
    assert "swa" in swa_arm["techniques"][0]["psg"] and "swa" not in psg_arm["techniques"][0]["psg"]
    assert len(results["targets"]) == 2 and all("60%" in t["text"] for t in results["targets"])
    assert "Table 2" in results["paper"]["citation"]
    table = (tmp_path / "table.md").read_text()
    assert all(name in table for name in names)
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
