"""The ``csb-utilisation`` reproduction runs end to end on its smoke budget and writes a consistent report."""

import json
import shutil

import pytest

from codesign.pe.csb.schedule import LayerShape
from codesign.reproduce import REPRODUCTIONS, csb_utilisation, reproduction

# VGG-11 CONV workloads in MOP per image (2 operations per MAC), Table 3 of the paper; conv2 is Table 4's
# 1.21 GOP / 32 images instead of Table 3's 151
PAPER_MOP = {"conv1": 3.54, "conv2": 1210 / 32, "conv3_1": 37.7, "conv3_2": 75.5, "conv4_1": 37.7,
             "conv4_2": 75.5, "conv5_1": 18.87, "conv5_2": 18.87}


def test_registered_under_its_hyphenated_name():
    assert "csb-utilisation" in REPRODUCTIONS
    assert reproduction("csb-utilisation") is csb_utilisation


def test_layers_reproduce_the_paper_workloads():
    assert [layer.name for layer in csb_utilisation.LAYERS] == list(PAPER_MOP)
    for layer in csb_utilisation.LAYERS:
        assert 2 * layer.dense_macs / 1e6 == pytest.approx(PAPER_MOP[layer.name], rel=0.01)


@pytest.mark.slow
def test_smoke_reproduction_writes_the_report(tmp_path):
    payload = csb_utilisation.run(tmp_path, smoke=True, progress=False)
    results = json.loads((tmp_path / "results.json").read_text())
    assert results == json.loads(json.dumps(payload))
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = (tmp_path / "table.md").read_text()
    for figure in ("96.4", "98.8", "88.5", "1.050"):  # the paper's figures stand beside ours
        assert figure in table
    assert "Table 3" in results["paper"]["citation"] and results["seeds"] == [0]
    row = results["readme"]
    assert row["reproduction"].startswith("`csb-utilisation`")
    assert row["verdict"].count("met") == len(results["targets"])

    layers = results["extra"]["layers"]
    assert set(layers) == set(PAPER_MOP)
    assert set(layers["conv1"]["2x2"]) == {"FP", "WG"} and set(layers["conv2"]["2x2"]) == {"FP", "EB", "WG"}
    for name, by_grouping in layers.items():
        for grouping, by_op in by_grouping.items():
            for op, row in by_op.items():
                first = row["first_seed"]
                shape = next(x for x in csb_utilisation.LAYERS if x.name == name)
                kept = round(0.4 * shape.in_channels * shape.out_channels)  # kernels kept, every op the same
                assert first["useful_macs"] == kept * 9 * shape.height * shape.width * 16
                assert first["mac_units"] == 32 * 16
                assert row["utilisation"]["mean"] == pytest.approx(
                    first["useful_macs"] / (first["cycles"] * first["mac_units"]))
                assert 0 < row["utilisation"]["mean"] <= row["compute_utilisation"]["mean"] <= 1
                read = first["common_load_cycles"] + first["local_load_cycles"]
                assert row["bound"] == ["compute" if first["compute_cycles"] >= max(read, first["save_cycles"])
                                        else "bandwidth"]

    # dropping the common-buffer limit only removes waits, so every seed runs at least as fast on chip
    for name, by_grouping in results["extra"]["on_chip_fp"].items():
        for grouping, by_op in by_grouping.items():
            assert set(by_op) == {"FP"}
            ping_pong = layers[name][grouping]["FP"]["compute_utilisation"]["per_seed"]
            assert all(a >= b for a, b in zip(by_op["FP"]["compute_utilisation"]["per_seed"], ping_pong))

    # Table 3's speed row, recomputed from the per-layer FP utilisations
    time_of = {g: sum(x.dense_macs / layers[x.name][g]["FP"]["compute_utilisation"]["mean"]
                      for x in csb_utilisation.LAYERS) for g in ("single", "2x2")}
    ideal = sum(x.dense_macs for x in csb_utilisation.LAYERS)
    speed = results["extra"]["normalised_speed"]
    assert speed["2x2"] == pytest.approx(time_of["single"] / time_of["2x2"])
    assert speed["ideal"] == pytest.approx(time_of["single"] / ideal)

    # one target per operation, judged on the 2x2 rows the model finds compute-bound
    assert [t["text"][:3] for t in results["targets"]] == ["FP:", "EB:", "WG:"]
    for target, op in zip(results["targets"], ("FP", "EB", "WG")):
        judged = [layers[name]["2x2"][op]["utilisation"]["mean"] for name in layers
                  if op in layers[name]["2x2"] and layers[name]["2x2"][op]["bound"] == ["compute"]]
        assert target["met"] == (bool(judged) and min(judged) >= 0.95)
    assert results["all_targets_met"] == all(t["met"] for t in results["targets"])

    sweep = results["extra"]["sweep_fp_compute_utilisation"]
    assert set(sweep["single"]["conv3_2"]) == {"8", "32"}
    assert set(sweep["2x2"]["conv3_2"]) == {"8", "32"}
    for name in layers:  # the sweep's 32-PE point is the table's configuration at unlimited bandwidth
        for grouping in ("single", "2x2"):
            assert sweep[grouping][name]["32"]["mean"] == pytest.approx(
                layers[name][grouping]["FP"]["compute_utilisation"]["mean"])


def test_bad_output_directory_is_refused_before_anything_runs(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ValueError, match="not writable"):
        csb_utilisation.run(blocker / "out", smoke=True)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("iverilog") is None, reason="Icarus Verilog (iverilog) is not on PATH")
def test_rtl_spot_check_measures_the_schedule_step_costs(tmp_path):
    """A small slice with partial blocks: the schedule's calc cycles equal the compute phases measured on the RTL."""
    pytest.importorskip("cocotb_tools.runner", reason="the RTL spot check needs cocotb 2.x")
    layer = LayerShape(name="slice", in_channels=12, out_channels=10, height=4, width=4, kernel=3)
    rows = csb_utilisation.rtl_spot_check(tmp_path, simulator="icarus", layer=layer, batch=2, seed=3)
    assert [(r["grouping"], r["op"]) for r in rows] == [(g, op) for g in ("single", "2x2") for op in ("FP", "EB", "WG")]
    for row in rows:
        assert row["transactions"] == 4 and row["mismatches"] == 0
        assert row["rtl_calc_cycles"] == row["model_calc_cycles"] > 0, row
