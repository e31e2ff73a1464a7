"""The ``cpt`` reproduction runs end to end on its smoke budget and writes a complete report."""

import json

import pytest

from codesign.reproduce import cpt


@pytest.mark.slow
def test_smoke_reproduction_writes_the_report(tmp_path):
    payload = cpt.run(tmp_path, smoke=True, progress=False)
    results = json.loads((tmp_path / "results.json").read_text())
    assert results == json.loads(json.dumps(payload))
    assert [arm["name"] for arm in results["arms"]] == ["fp32", "static8", "cpt", "cpt_rint"]
    assert [arm["baseline"] for arm in results["arms"]] == [True, False, False, False]
    assert results["paper"]["citation"].endswith("Table 2") and len(results["targets"]) == 1
    table = (tmp_path / "table.md").read_text()
    assert all(f"| {name}" in table for name in ("fp32 (baseline)", "static8", "cpt", "cpt_rint"))
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # the target's ratios are against the same-seed static 8-bit run, computed from the arms' own BitOPs
    arms = {arm["name"]: arm for arm in results["arms"]}
    versus = results["extra"]["vs_static8"]["cpt"]
    expected = arms["cpt"]["per_seed"][0]["bitops"] / arms["static8"]["per_seed"][0]["bitops"]
    assert versus["bitops_ratio_per_seed"] == [pytest.approx(expected, rel=1e-12)]
    assert f"{expected:.3f}" in results["targets"][0]["measured"]
    assert results["targets"][0]["met"] == (expected <= 0.65 and arms["cpt"]["accuracy_mean"] >= arms["static8"]["accuracy_mean"])
    # static 8 bit costs 8 x 8 bits per MAC against fp32's 32 x 32; CPT (B_min <= 8) no more than that
    assert arms["static8"]["bitops_ratio_mean"] == pytest.approx(64 / 1024)
    assert arms["cpt"]["bitops_mean"] < arms["static8"]["bitops_mean"]
    # the range test ran in epoch 0 and picked a width the schedule then used
    (row,) = results["extra"]["range_test"]["cpt"]
    assert 2 <= row["min_bits"] <= 8 and row["held_forward_macs"] > 0
    assert str(row["min_bits"]) in row["steps_by_forward_bits"]
