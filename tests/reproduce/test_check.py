"""`codesign reproduce check`: refusals before any write, per-arm agreement (exact and within tolerance), and a rerun
of a smoke reproduction that agrees bit for bit, then disagrees once a committed value is altered."""

import json
import math

import pytest
from scipy import stats as scipy_stats

from codesign.cli import main
from codesign.reproduce import check, smd
from codesign.reproduce.machine import machine_record


def _arm(name, accuracies, seeds=None):
    seeds = list(range(len(accuracies))) if seeds is None else seeds
    return {"name": name, "chosen": {}, "per_seed": [
        {"seed": seed, "test_accuracy": acc, "validation_accuracy": 90.0, "energy_pj": 1e6, "bitops": 1e9,
         "steps": 10, "skipped_steps": 0} for seed, acc in zip(seeds, accuracies)]}


def test_tolerance_is_the_half_width_of_the_committed_t_interval():
    values = [91.0, 92.5, 90.0, 93.0]
    n = len(values)
    mean = sum(values) / n
    s = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    expected = scipy_stats.t.ppf(0.975, n - 1) * s / math.sqrt(n)
    assert check.tolerance_pt(_arm("a", values)) == pytest.approx(expected, abs=1e-3)
    assert check.tolerance_pt(_arm("a", [91.0])) == 0.0  # one seed: no spread, only the same value agrees


def test_exact_mode_wants_the_same_bits():
    committed = _arm("a", [91.0, 92.5, 90.0, 93.0])
    same = _arm("a", [91.0, 92.5])
    assert check.compare_arm(committed, same, exact=True).agrees
    moved = _arm("a", [91.0, 92.5 + 1e-9])
    agreement = check.compare_arm(committed, moved, exact=True)
    assert not agreement.agrees and [row["identical"] for row in agreement.rows] == [True, False]
    assert "DISAGREES" in agreement.verdict()
    other_energy = _arm("a", [91.0])
    other_energy["per_seed"][0]["energy_pj"] = 2e6
    assert not check.compare_arm(committed, other_energy, exact=True).agrees


def test_tolerance_mode_accepts_moves_within_the_half_width_only():
    committed = _arm("a", [91.0, 92.5, 90.0, 93.0])
    half = check.tolerance_pt(committed)
    assert check.compare_arm(committed, _arm("a", [91.0 + 0.9 * half, 92.5 - 0.9 * half]), exact=False).agrees
    outside = check.compare_arm(committed, _arm("a", [91.0, 92.5 + 1.1 * half]), exact=False)
    assert not outside.agrees and [row["agrees"] for row in outside.rows] == [True, False]
    with pytest.raises(ValueError, match="seed 9"):
        check.compare_arm(committed, _arm("a", [91.0], seeds=[9]), exact=False)


@pytest.mark.parametrize("argv, message", [
    (["reproduce", "check", "nope", "--seeds", "1"], "invalid choice"),
    (["reproduce", "check", "smd", "--seeds", "0"], "whole number >= 1"),
    (["reproduce", "check", "smd", "--seeds", "x"], "--seeds"),
    (["reproduce", "check", "smd"], "--seeds"),
])
def test_bad_name_or_count_is_refused_by_the_parser(argv, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--out", str(tmp_path / "scratch")])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "scratch").exists()


def test_refusals_before_anything_is_written(tmp_path, capsys):
    results = tmp_path / "results"
    (results / "smd").mkdir(parents=True)
    scratch = tmp_path / "scratch"
    base = ["--results", str(results), "--out", str(scratch)]
    assert main(["reproduce", "check", "smd", "--seeds", "1", *base]) == 2
    assert "no committed report" in capsys.readouterr().err
    (results / "smd" / "results.json").write_text(json.dumps({"seeds": [0, 1], "arms": [_arm("smb", [90.0, 91.0])]}))
    assert main(["reproduce", "check", "smd", "--seeds", "3", *base]) == 2
    assert "give 1..2" in capsys.readouterr().err
    assert main(["reproduce", "check", "smd", "--seeds", "1", "--results", str(results),
                 "--out", str(results / "scratch")]) == 2
    assert "inside the committed reports' folder" in capsys.readouterr().err
    assert main(["reproduce", "check", "tt", "--seeds", "1", *base]) == 2
    assert "cannot check tt" in capsys.readouterr().err
    assert not scratch.exists() and not (results / "scratch").exists()


@pytest.mark.slow
def test_a_rerun_agrees_bit_for_bit_then_an_altered_committed_value_disagrees(tmp_path, capsys):
    results = tmp_path / "results"
    committed = smd.run(results / "smd", smoke=True, progress=False)
    assert committed["machine"] == machine_record()
    scratch = tmp_path / "scratch"
    argv = ["reproduce", "check", "smd", "--seeds", "1", "--results", str(results), "--out", str(scratch),
            "--workers", "0"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    names = [arm["name"] for arm in committed["arms"]]
    assert "comparison: exact" in out and "VERDICT: all 4 arms agree" in out
    assert all(f"[check smd] {name} seed 0 split 0:" in out and f"{name}: agrees (1/1 seeds bit-identical" in out
               for name in names)
    report = json.loads((scratch / "smd" / "check.json").read_text())
    assert report["agrees"] and report["mode"] == "exact" and [a["name"] for a in report["arms"]] == names

    altered = json.loads((results / "smd" / "results.json").read_text())
    altered["arms"][1]["per_seed"][0]["test_accuracy"] += 0.5
    (results / "smd" / "results.json").write_text(json.dumps(altered))
    assert main(argv) == 1  # the reruns are cached in the scratch folder: only the comparison changes
    out = capsys.readouterr().out
    assert f"{names[1]}: DISAGREES" in out and f"VERDICT: 1 of 4 arms disagree: {names[1]}" in out
    assert "Δ -0.5000 pt" in out

    del altered["machine"]  # no machine record: the tolerance of one committed seed is 0, so 0.5 pt still fails
    (results / "smd" / "results.json").write_text(json.dumps(altered))
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "statistical tolerance (the committed report has no machine record)" in out and "DISAGREES" in out


def test_a_rerun_that_plans_arms_the_committed_run_did_not_train_disagrees(tmp_path, capsys):
    """abvs and cpt plan their arms from their own selections; when a rerun selects differently (another least
    sufficient FB), the verdict says which arms it planned, and nothing is compared."""
    results = tmp_path / "results"
    committed = smd.run(results / "smd", smoke=True, progress=False)
    renamed = json.loads((results / "smd" / "results.json").read_text())
    planned = renamed["arms"][0]["name"]
    renamed["arms"][0]["name"] = "an_arm_of_another_selection"
    (results / "smd" / "results.json").write_text(json.dumps(renamed))
    argv = ["reproduce", "check", "smd", "--seeds", "1", "--results", str(results), "--out", str(tmp_path / "s"),
            "--workers", "0"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert f"VERDICT: DISAGREES: the rerun's own selections planned arm(s) {planned}" in out
    report = json.loads((tmp_path / "s" / "smd" / "check.json").read_text())
    assert not report["agrees"] and report["unplanned_arms"] == [planned] and len(committed["arms"]) == 4


def test_a_scratch_folder_holding_a_users_file_is_refused(tmp_path, capsys):
    results = tmp_path / "results"
    (results / "smd").mkdir(parents=True)
    (results / "smd" / "results.json").write_text(json.dumps({"seeds": [0], "arms": [_arm("smb", [90.0])]}))
    users = tmp_path / "scratch" / "smd"
    users.mkdir(parents=True)
    (users / "notes.txt").write_text("mine")
    assert main(["reproduce", "check", "smd", "--seeds", "1", "--results", str(results),
                 "--out", str(tmp_path / "scratch")]) == 2
    assert "smd" in capsys.readouterr().err
    assert sorted(path.name for path in users.iterdir()) == ["notes.txt"]


def test_an_arm_rerun_with_another_tuned_setting_disagrees():
    committed = {**_arm("a", [91.0, 92.0]), "chosen": {"optim.lr": 0.1}}
    same = {**_arm("a", [91.0]), "chosen": {"optim.lr": 0.1}}
    other = {**_arm("a", [91.0]), "chosen": {"optim.lr": 0.05}}
    assert check.compare_arm(committed, same, exact=True).agrees
    agreement = check.compare_arm(committed, other, exact=True)
    assert not agreement.agrees and not agreement.same_setting and "another tuned setting" in agreement.verdict()
    assert check.committed_choices({"arms": [{"name": "a", "chosen": {"x.y": [1, [2, 3]]}}]}) == {"a": {"x.y": (1, (2, 3))}}
