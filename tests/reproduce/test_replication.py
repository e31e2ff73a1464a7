"""A report's recorded runs restated: claims over runs and over seed means, at the paper's and at the relative
margin; energy ratios with every test pass charged; the section table.md carries."""

import json
import math
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats as scipy_stats

from codesign.reproduce.cost import EvaluationPasses, data_sizes
from codesign.reproduce.replication import (BEGIN, END, Judged, PaperReference, claim, claim_cells, energy,
                                            module_of, paper_reference, recorded_passes, relative_margin, replication,
                                            section, with_section)
from codesign.reproduce.tt_report import EFFECTS as TT_EFFECTS

RESULTS = Path(__file__).resolve().parents[2] / "results"
BASE = [98.0, 97.0, 99.0, 98.0, 98.0, 97.0]  # seeds 0, 1, 2 on split 0, then on split 1
TECH = [97.0, 97.0, 98.0, 99.0, 96.0, 97.0]


def _rows(accuracies, *, energy_pj=1100.0, training=1000.0, steps=6):
    seeds = [0, 1, 2, 0, 1, 2]
    splits = [0, 0, 0, 1, 1, 1]
    return [{"seed": s, "split_seed": k, "test_accuracy": a, "validation_accuracy": None, "energy_pj": energy_pj,
             "training_energy_pj": training, "steps": steps} for s, k, a in zip(seeds, splits, accuracies)]


def _payload(**arms_energy) -> dict:
    return {"name": "x", "settings": {}, "arms": [
        {"name": "base", "baseline": True, "accuracy_tost": {}, "per_seed": _rows(BASE, **arms_energy.get("base", {}))},
        {"name": "tech", "baseline": False, "accuracy_tost": {"margin": 1.0},
         "per_seed": _rows(TECH, **arms_energy.get("tech", {}))}]}


def test_the_relative_margin_is_the_margin_times_our_error_over_the_papers():
    assert relative_margin(1.0, 98.0, 92.0) == pytest.approx(0.25)  # 1 pt x 2 % / 8 %
    assert relative_margin(3.0, 97.56, 89.27) == pytest.approx(3.0 * 2.44 / 10.73)
    assert relative_margin(1.0, 100.0, 92.0) == 0.0
    with pytest.raises(ValueError, match="no error"):
        relative_margin(1.0, 98.0, 100.0)
    with pytest.raises(ValueError, match="ours_pct"):
        relative_margin(1.0, 101.0, 92.0)


def test_a_claim_is_judged_over_runs_and_over_seed_means_by_hand():
    paper = PaperReference(accuracy_pct=92.0, citation="a table")
    entry = claim(_payload(), Judged(arm="tech", reference="base", margin_pt=1.0), paper)
    differences = [t - b for t, b in zip(TECH, BASE)]  # -1, 0, -1, +1, -2, 0
    assert entry["runs"]["values"] == differences and entry["runs"]["n"] == 6
    assert entry["seeds"]["means"] == pytest.approx([0.0, -1.0, -0.5]) and entry["seeds"]["n"] == 3
    # TOST over the three seed means by hand: the larger one-sided p at 2 degrees of freedom
    mean, se = -0.5, float(np.std([0.0, -1.0, -0.5], ddof=1)) / math.sqrt(3)
    by_hand = max(scipy_stats.t.sf((mean + 1.0) / se, 2), scipy_stats.t.cdf((mean - 1.0) / se, 2))
    assert entry["seeds"]["tost"]["p"] == pytest.approx(by_hand, rel=1e-12)
    assert entry["reference_accuracy_pct"] == pytest.approx(97.833333333)  # the baseline's mean over its runs
    relative = entry["relative"]
    assert relative["margin_pt"] == pytest.approx((100 - 97.833333333) / 8.0)
    assert relative["seeds"]["margin"] == pytest.approx(relative["margin_pt"]) and not relative["seeds"]["equivalent"]
    cells = claim_cells(entry)
    assert cells[0] == "tech − base" and cells[1] == "±1 pt" and cells[2].endswith("(n = 6)")
    assert "(n = 3; 90 % t" in cells[3] and cells[4].startswith("±0.27 pt (2.17 % / 8.00 % error)")


def test_without_a_paper_figure_or_with_a_flawless_reference_no_relative_verdict_is_given():
    none = PaperReference(accuracy_pct=None, citation="the paper plots it only")
    entry = claim(_payload(), Judged(arm="tech", reference="base", margin_pt=1.0), none)
    assert entry["relative"] is None and claim_cells(entry)[4] == "none: the paper plots it only"
    flawless = _payload()
    for row in flawless["arms"][0]["per_seed"]:
        row["test_accuracy"] = 100.0
    entry = claim(flawless, Judged(arm="tech", reference="base", margin_pt=1.0),
                  PaperReference(accuracy_pct=90.0, citation="t"))
    assert entry["relative"]["margin_pt"] == 0.0 and entry["relative"]["seeds"] is None
    assert claim_cells(entry)[5] == "no margin: our reference errs 0 %"


def test_a_claim_needs_the_same_seed_and_split_pairs():
    payload = _payload()
    payload["arms"][1]["per_seed"][0]["seed"] = 9
    with pytest.raises(ValueError, match="not those of base"):
        claim(payload, Judged(arm="tech", reference="base", margin_pt=1.0), None)
    with pytest.raises(ValueError, match="margin_pt"):
        Judged(arm="tech", reference="base", margin_pt=0.0)
    with pytest.raises(ValueError, match="accuracy_pct"):
        PaperReference(accuracy_pct=100.0, citation="t")


def test_every_test_pass_charged_by_hand():
    # charged 1100 of which training 1000: the 100 pJ are 3 x 10 validation + 20 test images at 2 pJ each; the two
    # test passes left out add 2 x 20 x 2 = 80 pJ
    payload = _payload(tech={"energy_pj": 1100.0, "training": 1000.0}, base={"energy_pj": 2200.0, "training": 2000.0})
    passes = {name: EvaluationPasses(epochs=3, validation=10, test=20) for name in ("base", "tech")}
    entry = energy(payload, "tech", "base", passes)
    assert entry["recorded"]["runs"]["bootstrap"]["mean"] == pytest.approx(0.5)
    assert entry["every_test"]["runs"]["values"] == pytest.approx([1180 / 2360] * 6)
    assert entry["every_test"]["seeds"]["n"] == 3 and "derived" in entry["every_test_source"]
    for row in payload["arms"][1]["per_seed"]:  # a run that records its every-test figure is read, not derived
        row["energy_pj_every_test"] = 1298.0
    assert energy(payload, "tech", "base", passes)["every_test"]["runs"]["values"] == pytest.approx([1298 / 2360] * 6)


def _sized_payload(**settings) -> dict:
    """Rows whose accuracies are whole images of the synthetic set's splits, 3 steps per epoch."""
    data = {"name": "synthetic", "synthetic_samples": 60, "validation_fraction": 0.2}
    sizes = data_sizes({"data": data})
    payload = _payload()
    for arm in payload["arms"]:
        for index, row in enumerate(arm["per_seed"]):
            row.update(test_accuracy=100 * (sizes["test"] - index % 2) / sizes["test"],
                       validation_accuracy=100 * (sizes["validation"] - 1) / sizes["validation"], steps=6)
    payload["settings"] = {"data": data, "optim": {"epochs": 2}, **settings}
    return payload, sizes


def test_evaluation_passes_are_read_from_the_settings_and_checked_against_the_runs():
    payload, sizes = _sized_payload()
    passes = recorded_passes(payload)
    assert passes["tech"] == EvaluationPasses(epochs=2, validation=sizes["validation"], test=sizes["test"])
    payload["settings"]["epochs_by_arm"] = {"base": 2, "tech": 3}  # 6 steps: 3 per epoch for one, 2 for the other
    with pytest.raises(ValueError, match="do not divide the runs' steps evenly"):
        recorded_passes(payload)
    payload, _ = _sized_payload()
    payload["arms"][1]["per_seed"][0]["test_accuracy"] = 97.0  # not a whole number of test images
    with pytest.raises(ValueError, match="not whole images"):
        recorded_passes(payload)
    payload, _ = _sized_payload()
    del payload["settings"]["optim"]
    with pytest.raises(ValueError, match="record no epochs"):
        recorded_passes(payload)


def test_hooks_name_claims_and_paper_figures_and_the_section_replaces_itself():
    judged = Judged(arm="tech", reference="base", margin_pt=1.0)
    special = PaperReference(accuracy_pct=90.0, citation="per claim")
    module = SimpleNamespace(PAPER_REFERENCE=PaperReference(accuracy_pct=92.0, citation="all"),
                             PAPER_REFERENCES={("tech", "base"): special},
                             restated_notes=lambda payload: ["a note"])
    assert paper_reference(module, judged) is special and paper_reference(None, judged) is None
    restated = replication(_sized_payload()[0], module)  # its rows predate the every-test figure: derived
    assert [c["arm"] for c in restated["claims"]] == ["tech"] and restated["notes"] == ["a note"]
    assert [e["arm"] for e in restated["energy"]] == ["tech"] and restated["energy"][0]["passes"]["tech"]["epochs"] == 2
    assert restated["claims"][0]["paper"]["citation"] == "per claim"
    text = section(json.loads(json.dumps(restated)))
    assert text.startswith(BEGIN) and text.endswith(END) and "- note: a note" in text and "\n\n\n" not in text
    table = with_section("# T\n\nbody\n", text)
    assert table == "# T\n\nbody\n\n" + text + "\n"
    assert with_section(table, text) == table and with_section(table, "new") == "# T\n\nbody\n\nnew\n"


def _committed(name: str) -> dict:
    return json.loads((RESULTS / name / "results.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", ["smd", "slu", "psg", "e2train", "cpt", "abvs", "compressed", "tt"])
def test_restated_claims_over_runs_are_the_verdicts_the_reports_recorded(name):
    payload = _committed(name)
    restated = replication(payload, module_of(name))
    recorded = {arm["name"]: arm["accuracy_tost"] for arm in payload["arms"] if arm["accuracy_tost"]}
    if name == "tt":  # tt records its claims in its comparisons
        comparisons = payload["comparisons"]
        recorded = {arm: entry["accuracy_difference_pt"]["tost"] for arm, entry in
                    comparisons["against_baseline"].items()}
        recorded.update({key: entry["accuracy_difference_pt"]["tost"] for group in TT_EFFECTS
                         for key, entry in comparisons[group].items()})
        assert set(comparisons) == {"against_baseline", *TT_EFFECTS}
        keys = [c["arm"] if c["reference"] == "fp32" else f"{c['arm']} vs {c['reference']}" for c in restated["claims"]]
    else:
        keys = [c["arm"] for c in restated["claims"]]
    assert sorted(keys) == sorted(recorded)
    for key, entry in zip(keys, restated["claims"]):
        assert entry["runs"]["tost"]["p"] == pytest.approx(recorded[key]["p"], rel=1e-9)
        assert entry["runs"]["tost"]["equivalent"] == recorded[key]["equivalent"]
        assert entry["seeds"]["n"] == len(payload["seeds"])


def test_smd_restated_the_way_issue_41_reads_it():
    """The committed smd study: equivalent at +-1 pt over 9 runs (p 0.002), not over 3 seed means (p 0.052); its
    energy ratio 0.702 with one test pass charged, 0.771 with every test pass."""
    payload = _committed("smd")
    restated = replication(payload, module_of("smd"))
    main = next(c for c in restated["claims"] if c["arm"] == "smd_x4/3")
    assert round(main["runs"]["tost"]["p"], 3) == 0.002 and main["runs"]["tost"]["equivalent"]
    assert round(main["seeds"]["tost"]["p"], 3) == 0.052 and not main["seeds"]["tost"]["equivalent"]
    assert main["relative"]["paper_error_pct"] == pytest.approx(100 - 93.52)
    ratio = next(e for e in restated["energy"] if e["arm"] == "smd_x4/3")
    assert round(ratio["recorded"]["runs"]["bootstrap"]["mean"], 3) == 0.702
    assert round(ratio["every_test"]["runs"]["bootstrap"]["mean"], 3) == 0.771
    # by hand for the first run: 12 and 9 epochs, 269 validation and 450 test images per pass
    arm, base = payload["arms"][1]["per_seed"][0], payload["arms"][0]["per_seed"][0]

    def every(row, epochs):
        per_image = (row["energy_pj"] - row["training_energy_pj"]) / (epochs * 269 + 450)
        return row["energy_pj"] + (epochs - 1) * 450 * per_image
    assert ratio["every_test"]["runs"]["values"][0] == pytest.approx(every(arm, 12) / every(base, 9), rel=1e-12)
    # the re-run records the figure per run; the passes read from the settings still derive the same one
    assert ratio["every_test_source"] == "recorded per run" and "passes" not in ratio
    assert asdict(recorded_passes(payload)["smd_x4/3"]) == {"epochs": 12, "validation": 269, "test": 450}
