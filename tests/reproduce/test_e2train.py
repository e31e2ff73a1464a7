import json

from codesign.reproduce import e2train


def test_smoke_reproduction_writes_the_report(tmp_path):
    payload = e2train.run(tmp_path, smoke=True, progress=False)
    assert {p.name for p in tmp_path.iterdir()} >= {"results.json", "table.md", "plot.png"}
    stored = json.loads((tmp_path / "results.json").read_text())
    assert [arm["name"] for arm in stored["arms"]] == ["fp32", "e2train", "e2train_same_epochs"]
    assert stored["arms"][0]["baseline"] and payload["targets"][0]["text"].startswith(">= 80%")
    # the combination really skips: SMD drops batches and every arm spends less than the baseline
    assert 0.2 < stored["extra"]["smd_drop_rate"][0] < 0.8
    assert all(arm["energy_ratio_mean"] < 1 for arm in stored["arms"][1:])
    assert "E2-Train" in (tmp_path / "table.md").read_text()
