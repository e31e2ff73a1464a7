"""The ``csb-utilisation`` reproduction runs end to end on its smoke budget and writes a consistent report."""

import json
import shutil

import numpy as np
import pytest

from codesign.step.csb.schedule import LayerShape
from codesign.reproduce import REPRODUCTIONS, csb_utilisation, reproduction

# VGG-11 CONV workloads in MOP per image (2 operations per MAC), Table 3 of the paper; conv2 is Table 4's
# 1.21 GOP / 32 images instead of Table 3's 151
PAPER_MOP = {"conv1": 3.54, "conv2": 1210 / 32, "conv3_1": 37.7, "conv3_2": 75.5, "conv4_1": 37.7,
             "conv4_2": 75.5, "conv5_1": 18.87, "conv5_2": 18.87}


# Table 3 of the paper (Compressed CNN Training with FPGA-based Accelerator, FPGA 2019): utilisation in %
TABLE3 = {"conv1": {"single": 80.0, "2x2": 88.5}, "conv2": {"single": 88.6, "2x2": 95.8},
          "conv3_1": {"single": 95.1, "2x2": 98.2}, "conv3_2": {"single": 96.4, "2x2": 98.8},
          "conv4_1": {"single": 96.3, "2x2": 98.7}, "conv4_2": {"single": 95.6, "2x2": 98.4},
          "conv5_1": {"single": 93.5, "2x2": 97.8}, "conv5_2": {"single": 93.5, "2x2": 97.8}}

# eight per-seed utilisations (fractions) with mean 0 and a small spread (sd 0.1 pt), shifted by an offset
SPREAD = [-0.0015, -0.001, -0.0005, 0.0, 0.0, 0.0005, 0.001, 0.0015]


def _seeds_around(pct: float, offset_pt: float) -> list[float]:
    return [(pct + offset_pt) / 100 + d for d in SPREAD]


def test_targets_are_table3_of_the_paper():
    assert {name: {"single": single, "2x2": grouped}
            for name, (_, _, single, grouped) in csb_utilisation.PAPER_TABLE3.items()} == TABLE3
    assert "Table 3" in csb_utilisation.CLAIM.citation
    assert 0 < csb_utilisation.MARGIN_PT < 2.4 / 2 + 1e-9  # below half the smallest single-vs-2x2 gap of Table 3


def test_a_layer_within_the_margin_is_met_and_one_outside_is_not():
    margin = csb_utilisation.MARGIN_PT
    inside = csb_utilisation.layer_verdict(_seeds_around(88.5, -0.5 * margin), 88.5)
    outside = csb_utilisation.layer_verdict(_seeds_around(88.5, -1.5 * margin), 88.5)
    above = csb_utilisation.layer_verdict(_seeds_around(88.5, +1.5 * margin), 88.5)
    assert inside["met"] and inside["tost"]["equivalent"] and inside["tost"]["p"] < 0.05
    assert not outside["met"] and not above["met"]
    assert inside["margin_pt"] == outside["margin_pt"] == margin
    assert inside["ours_pct"]["mean"] == pytest.approx(88.5 - 0.5 * margin)
    assert inside["ours_pct"]["n"] == inside["ours_pct_t"]["n"] == 8
    # the t-interval of ours is wider than the bootstrap at eight seeds, and both hold the mean
    t, boot = inside["ours_pct_t"], inside["ours_pct"]
    assert t["low"] < boot["low"] <= boot["mean"] <= boot["high"] < t["high"]


def test_wide_spread_is_not_met_even_with_the_mean_on_the_figure():
    """Equivalence needs the interval inside the margin, not a mean near the figure."""
    values = [0.80 + d * 20 for d in SPREAD]  # mean exactly 80 %, sd 2 pt
    verdict = csb_utilisation.layer_verdict(values, 80.0)
    assert verdict["ours_pct"]["mean"] == pytest.approx(80.0)
    assert not verdict["met"]


def test_one_seed_is_never_met():
    assert not csb_utilisation.layer_verdict([0.885], 88.5)["met"]


def test_the_margin_constant_is_the_one_used(monkeypatch):
    values = _seeds_around(95.8, -2.0)  # 2 pt below the figure: outside 1.2 pt, inside 3 pt
    assert not csb_utilisation.layer_verdict(values, 95.8)["met"]
    monkeypatch.setattr(csb_utilisation, "MARGIN_PT", 3.0)
    verdict = csb_utilisation.layer_verdict(values, 95.8)
    assert verdict["met"] and verdict["margin_pt"] == 3.0 and verdict["tost"]["margin"] == 3.0


def test_bad_paper_figure_is_refused():
    with pytest.raises(ValueError, match="Table 3"):
        csb_utilisation.layer_verdict(_seeds_around(90.0, 0.0), 0.0)


def test_per_layer_verdicts_and_overall_summary():
    """Each layer and grouping is judged against its own figure; the summary names the layers that meet it."""
    rows, met = {}, {"conv4_2": "single", "conv5_1": "2x2"}
    for name, figures in TABLE3.items():
        rows[name] = {}
        for grouping, pct in figures.items():
            offset = 0.3 if met.get(name) == grouping else -2.0
            rows[name][grouping] = {"FP": {"compute_utilisation": {"per_seed": _seeds_around(pct, offset)}}}
    verdicts = csb_utilisation.table3_verdicts(rows)
    judged = {(name, g) for name, by_group in verdicts.items() for g, v in by_group.items() if v["met"]}
    assert judged == set(met.items())
    assert all(verdicts[n][g]["paper_pct"] == TABLE3[n][g] for n in TABLE3 for g in ("single", "2x2"))
    targets = csb_utilisation._targets(verdicts)
    assert [t.met for t in targets] == [(n, g) in judged for g in ("single", "2x2") for n in TABLE3]
    summary = csb_utilisation._verdict_summary(verdicts)
    assert summary == ("single: 1 of 8 layers met (conv4_2), 7 **not met**; "
                       "2x2: 1 of 8 layers met (conv5_1), 7 **not met**")


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

    # one target per layer and grouping, each against its own Table 3 figure at the module's margin
    assert len(results["targets"]) == 2 * len(PAPER_MOP)
    verdicts = results["extra"]["table3_verdicts"]
    for target, (grouping, name) in zip(results["targets"], [(g, n) for g in ("single", "2x2") for n in PAPER_MOP]):
        assert target["text"].startswith(f"{name} {grouping}:")
        verdict = verdicts[name][grouping]
        assert verdict["paper_pct"] == TABLE3[name][grouping]
        assert verdict["margin_pt"] == csb_utilisation.MARGIN_PT
        assert verdict["ours_pct"]["mean"] == pytest.approx(
            100 * layers[name][grouping]["FP"]["compute_utilisation"]["mean"])
        assert target["met"] is verdict["met"] is False  # one seed has no spread: TOST shows nothing
    assert results["all_targets_met"] == all(t["met"] for t in results["targets"])
    assert results["readme"]["verdict"] == "single: 0 of 8 layers met, 8 **not met**; 2x2: 0 of 8 layers met, 8 **not met**"

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


def test_every_layer_draws_its_own_mask_even_when_shapes_repeat():
    by_name = {layer.name: layer for layer in csb_utilisation.LAYERS}
    same_shape = [csb_utilisation.layer_mask(by_name[name], 0.4, 3) for name in ("conv4_2", "conv5_1", "conv5_2")]
    assert same_shape[0].shape == same_shape[1].shape == same_shape[2].shape == (512, 512)
    assert not np.array_equal(same_shape[0], same_shape[1]) and not np.array_equal(same_shape[1], same_shape[2])
    assert all(int(mask.sum()) == round(0.4 * 512 * 512) for mask in same_shape)  # the kept share stays exact
    assert np.array_equal(csb_utilisation.layer_mask(by_name["conv5_1"], 0.4, 3), same_shape[1])  # reproducible
    assert not np.array_equal(csb_utilisation.layer_mask(by_name["conv5_1"], 0.4, 4), same_shape[1])  # per seed
    (note,) = csb_utilisation.restated_notes({"seeds": [0, 1], "settings": {"masks": csb_utilisation.MASKS}})
    assert "independent per layer and seed" in note and "(n = 2)" in note
