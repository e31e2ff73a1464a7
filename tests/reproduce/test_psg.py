"""The PSG reproduction runs end to end on a smoke budget: tuned arms, paired intervals, the energy breakdown."""

import json

import pytest

from codesign.reproduce import psg

pytestmark = pytest.mark.slow  # the smoke run takes 17 s


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("psg")
    return out, psg.run(out, smoke=True, progress=False)


def test_smoke_reproduction_writes_the_reports_with_all_arms(smoke):
    out, payload = smoke
    results = json.loads((out / "results.json").read_text())
    assert results == json.loads(json.dumps(payload))
    names = [arm["name"] for arm in results["arms"]]
    assert names == ["FP32 SGD", "fixed 8/16", "PSG", "PSG+SWA", "SignSGD"]
    assert [arm["baseline"] for arm in results["arms"]] == [True, False, False, False, False]
    baseline, fixed, psg_arm, swa_arm, signsgd = results["arms"]
    assert baseline["energy_ratio"]["mean"] == 1.0 and baseline["accuracy_difference"]["mean"] == 0.0
    assert 0 < fixed["energy_ratio"]["mean"] < 1 and 0 < psg_arm["energy_ratio"]["mean"] < 1
    fractions = results["extra"]["predicted_fraction"]
    assert set(fractions) == {"PSG", "PSG+SWA"} and 0 < fractions["PSG"]["overall_mean"] <= 1
    assert fixed["techniques"][0]["psg"]["predicted_fraction"]["overall"] is None  # no prediction in that arm
    assert "swa" in swa_arm["techniques"][0]["psg"] and "swa" not in psg_arm["techniques"][0]["psg"]
    assert len(results["targets"]) == 2 and all("60%" in t["text"] for t in results["targets"])
    assert "signsgd" in signsgd["techniques"][0] and "signsgd" not in psg_arm["techniques"][0]
    assert "Table 2" in results["paper"]["citation"]
    table = (out / "table.md").read_text()
    assert all(name in table for name in names) and "Tuning" in table
    assert (out / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert results["readme"]["reproduction"].startswith("`psg`")


def test_every_arm_tuned_with_the_same_budget_on_validation(smoke):
    _, results = smoke
    # every arm's own grid has two trials; a choice on an edge adds one trial per widening, recorded as such
    for name, entry in results["tuning"].items():
        assert len([t for t in entry["trials"] if t["widening"] == 0]) == 2
        assert len(entry["trials"]) == 2 + len(entry["widenings"])
    for name, entry in results["tuning"].items():
        best = max(entry["trials"], key=lambda t: t["validation_accuracy"])
        assert entry["chosen"] == best["setting"] or best["validation_accuracy"] == max(
            t["validation_accuracy"] for t in entry["trials"] if t["setting"] == entry["chosen"])
        assert all("test" not in key for trial in entry["trials"] for key in trial)
    arm = next(a for a in results["arms"] if a["name"] == "PSG")
    assert arm["chosen"] == results["tuning"]["PSG"]["chosen"]
    assert all(row["validation_accuracy"] is not None for row in arm["per_seed"])


def test_breakdown_adds_up_to_the_saving(smoke):
    _, results = smoke
    breakdown = results["extra"]["energy_breakdown"]
    total = breakdown["quantisation"]["mean"] + breakdown["PSG"]["prediction"]["mean"]
    psg_arm = next(a for a in results["arms"] if a["name"] == "PSG")
    assert total == pytest.approx(1 - psg_arm["energy_ratio"]["mean"], rel=1e-9)


def test_signsgd_arm_costs_the_full_backward_and_is_compared_with_psg_per_seed(smoke):
    _, results = smoke
    arms = {arm["name"]: arm for arm in results["arms"]}
    signsgd, fixed = arms["SignSGD"], arms["fixed 8/16"]
    # the sign of the full gradient saves nothing: the same charges as the fixed-point arm, seed by seed
    assert [r["energy_pj"] for r in signsgd["per_seed"]] == [r["energy_pj"] for r in fixed["per_seed"]]
    assert signsgd["techniques"][0]["signsgd"]["signed_entries"] > 0
    assert results["tuning"]["SignSGD"]["trials"][0]["setting"]["optim.lr"] in psg.SIGN_LRS
    comparison = results["extra"]["psg_vs_signsgd"]
    expected = [p["test_accuracy"] - s["test_accuracy"] for p, s in zip(arms["PSG"]["per_seed"], signsgd["per_seed"])]
    assert comparison["differences"] == pytest.approx(expected) and "t " in comparison["text"]
    assert "SignSGD" in results["readme"]["measured"]
