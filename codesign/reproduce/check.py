"""``codesign reproduce check NAME --seeds K``: rerun the first K seeds of a committed reproduction and compare.

A committed figure is only worth something if somebody else can get it again.
This reruns the first ``K`` committed seeds of every arm of reproduction
``NAME`` with the committed code's arms and the committed **tuning choices**
(:func:`codesign.reproduce.tuning.pinned_tuning`: no trial run, so another
machine cannot pick another setting) into a scratch folder, never over the
committed report, and compares each rerun with the committed run of the same
arm and seed:

* **exact** when the committed report's machine record matches this machine
  (:func:`codesign.reproduce.machine.same_machine`): test and validation
  accuracy, energy (pJ), BitOPs, steps and skipped steps must be the same
  bits. Same code, same seed, same float path: anything else is a defect.
* **statistical tolerance** otherwise: torch's kernels sum in an order that
  depends on the CPU's instruction set (docs/training.md), so a seed's test
  accuracy may move. Each rerun seed's test accuracy must lie within the
  half-width of the committed arm's 95 % Student t-interval of the mean
  (t_{0.975, n-1} * s / sqrt(n) over the committed seeds, in points) of its
  committed value: a move smaller than the committed uncertainty of the arm's
  mean cannot change a verdict read off that mean. The other metrics are
  reported, not judged (energy and BitOPs follow the steps taken).

An arm whose rerun trained another tuned setting than the committed one
disagrees whatever it scores. ``abvs`` and ``cpt`` rerun their own
selections before the arms (the least sufficient FB and ABVS's schedule on
fixed preliminary seeds, the B_min range test): on another float path those
may choose differently, and that shows up as an arm that disagrees, or as
arms the committed run did not train (the verdict says which).

Reproductions whose tuning reads no pinned choices (``tt``: its own trials
and choice rules, :func:`codesign.reproduce.tt.tune`; ``tt-fashion``:
:func:`codesign.reproduce.tt_fashion.choose_weight`) or that run no
training arms per seed (``csb-utilisation``) are refused: a rerun would
re-tune.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from codesign.reproduce.common import Execution
from codesign.reproduce.machine import machine_record, same_machine
from codesign.reproduce.stats import t_interval
from codesign.reproduce.tuning import UnpinnedArms, pinned_tuning

UNPINNABLE = {"tt": "tt tunes with its own trials and choice rules, which read no pinned choices, so a rerun "
                    "would re-tune",
              "tt-fashion": "tt-fashion tunes its prior weight with its own trials and choice rule, which read no "
                            "pinned choices, so a rerun would re-tune",
              "csb-utilisation": "csb-utilisation has no tuned training arms per seed to rerun"}
COMPARED = ("test_accuracy", "validation_accuracy", "energy_pj", "bitops", "steps", "skipped_steps")
CHECK_JSON = "check.json"


@dataclass
class ArmAgreement:
    """One arm's rerun seeds against its committed ones."""

    name: str
    mode: str  # "exact" or "tolerance"
    tolerance_pt: float  # half-width of the committed 95 % t-interval of the arm's mean test accuracy, points
    agrees: bool = True
    same_setting: bool = True  # the rerun trained the committed tuned setting
    rows: list[dict[str, Any]] = field(default_factory=list)

    def verdict(self) -> str:
        identical = sum(row["identical"] for row in self.rows)
        worst = max((abs(row["test_accuracy_difference_pt"]) for row in self.rows), default=0.0)
        how = ("bit-identical required" if self.mode == "exact"
               else f"|Δ test accuracy| <= {self.tolerance_pt:.3f} pt per seed")
        setting = "" if self.same_setting else "; the rerun trained another tuned setting than the committed one"
        return (f"{self.name}: {'agrees' if self.agrees else 'DISAGREES'} ({identical}/{len(self.rows)} seeds "
                f"bit-identical, largest |Δ test accuracy| {worst:.3f} pt; {how}{setting})")


def _plain(value: Any) -> Any:
    """As JSON has it (tuples become lists), so a committed and a rerun setting compare like for like."""
    return json.loads(json.dumps(value))


def committed_report(results_dir: Path, name: str) -> dict[str, Any]:
    """The committed ``results.json`` of ``name``, checked to hold what a rerun is compared with."""
    from codesign.reproduce import reproduction

    reproduction(name)  # an unknown name is refused here
    if name in UNPINNABLE:
        raise ValueError(f"cannot check {name}: {UNPINNABLE[name]}")
    path = Path(results_dir) / name / "results.json"
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{path}: no committed report of {name} to check against") from None
    except ValueError as error:
        raise ValueError(f"{path}: not valid JSON ({error})") from None
    arms = payload.get("arms") if isinstance(payload, dict) else None
    if not arms or not isinstance(payload.get("seeds"), list) or any("per_seed" not in arm for arm in arms):
        raise ValueError(f"{path}: not a reproduction report with arms, seeds and per-seed runs")
    return payload


def check_seed_count(payload: dict[str, Any], k: int) -> list[int]:
    """The first ``k`` committed seeds (``k`` between 1 and the number committed)."""
    seeds = payload["seeds"]
    if not 1 <= k <= len(seeds):
        raise ValueError(f"--seeds {k}: the committed report has {len(seeds)} seed(s) {seeds}; give 1..{len(seeds)}")
    return list(seeds[:k])


def check_scratch_dir(out: Path, results_dir: Path) -> None:
    """The rerun never writes into the committed reports' folder."""
    out, results_dir = Path(out).resolve(), Path(results_dir).resolve()
    if out == results_dir or results_dir in out.parents:
        raise ValueError(f"--out {out}: inside the committed reports' folder {results_dir}; give a scratch folder")


def _as_setting(value: Any) -> Any:
    """JSON gives lists where the configuration had tuples."""
    return tuple(_as_setting(item) for item in value) if isinstance(value, list) else value


def committed_choices(payload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {arm["name"]: {path: _as_setting(value) for path, value in arm.get("chosen", {}).items()}
            for arm in payload["arms"]}


def tolerance_pt(arm: dict[str, Any]) -> float:
    """Half-width of the 95 % t-interval of the committed arm's mean test accuracy (0 with one seed)."""
    values = [row["test_accuracy"] for row in arm["per_seed"]]
    interval = t_interval(values)
    return max(interval.high - interval.mean, interval.mean - interval.low)


def compare_arm(committed: dict[str, Any], rerun: dict[str, Any], *, exact: bool) -> ArmAgreement:
    """Each rerun (seed, split) of an arm against the committed run of the same seed and split (split 0 where a
    report predates resampled splits)."""
    agreement = ArmAgreement(name=committed["name"], mode="exact" if exact else "tolerance",
                             tolerance_pt=tolerance_pt(committed))
    agreement.same_setting = _plain(rerun.get("chosen", {})) == _plain(committed.get("chosen", {}))
    agreement.agrees = agreement.same_setting  # another tuned setting is not the committed arm, whatever it scores
    by_run = {(row["seed"], row.get("split_seed", 0)): row for row in committed["per_seed"]}
    for row in rerun["per_seed"]:
        old = by_run.get((row["seed"], row.get("split_seed", 0)))
        if old is None:
            raise ValueError(f"arm {committed['name']}: seed {row['seed']} split {row.get('split_seed', 0)} is not "
                             "in the committed runs")
        identical = all(row.get(key) == old.get(key) for key in COMPARED)
        difference = row["test_accuracy"] - old["test_accuracy"]
        ok = identical if exact else abs(difference) <= agreement.tolerance_pt
        agreement.rows.append({"seed": row["seed"], "split_seed": row.get("split_seed", 0), "identical": identical,
                               "agrees": ok,
                               "test_accuracy_difference_pt": difference,
                               "committed": {key: old.get(key) for key in COMPARED},
                               "rerun": {key: row.get(key) for key in COMPARED}})
        agreement.agrees = agreement.agrees and ok
    return agreement


def run_line(name: str, arm: str, row: dict[str, Any]) -> str:
    old, new = row["committed"], row["rerun"]
    moved = ", ".join(key for key in COMPARED if old.get(key) != new.get(key))
    state = "identical" if row["identical"] else (f"{moved} differ(s), within tolerance" if row["agrees"]
                                                  else f"{moved} differ(s): DISAGREES")
    return (f"[check {name}] {arm} seed {row['seed']} split {row.get('split_seed', 0)}: test {new['test_accuracy']:.4f} % (committed "
            f"{old['test_accuracy']:.4f} %, Δ {row['test_accuracy_difference_pt']:+.4f} pt), energy "
            f"{_ratio(new['energy_pj'], old['energy_pj'])} of committed: {state}")


def _ratio(new: Any, old: Any) -> str:
    if not isinstance(new, (int, float)) or not isinstance(old, (int, float)) or not old or not math.isfinite(old):
        return "n/a"
    return f"{new / old:.6f}x"


def check(name: str, k: int, *, results_dir: Path, out: Path, execution: Execution = Execution(),
          echo=print) -> bool:
    """Rerun, compare, write ``OUT/NAME/check.json``; True when every arm agrees. Refusals come before any write."""
    from codesign.io.outdir import output_dir
    from codesign.io.reports import write_json_atomic
    from codesign.reproduce import COMMAND, check_report_dir, is_report_dir, reproduction

    payload = committed_report(results_dir, name)
    seeds = check_seed_count(payload, k)
    check_scratch_dir(out, results_dir)
    folder = check_report_dir(Path(out) / name)
    here, there = machine_record(), payload.get("machine")
    exact = same_machine(here, there)
    echo(f"[check {name}] rerunning seeds {seeds} of {len(payload['arms'])} arm(s) with the committed tuning "
         f"choices into {folder}; comparison: "
         + ("exact (the committed machine record matches this machine)" if exact else
            "statistical tolerance (" + ("the committed report has no machine record" if not there else
                                         "the committed report ran on another machine or software") + ")"))
    record = {"name": name, "seeds": seeds, "mode": "exact" if exact else "tolerance", "machine": here,
              "committed_machine": there}
    with output_dir(folder, COMMAND, is_own=is_report_dir), pinned_tuning(committed_choices(payload)):
        try:
            rerun = reproduction(name).run(folder, seeds=seeds, smoke=bool(payload.get("settings", {}).get("smoke")),
                                           execution=execution)
        except UnpinnedArms as error:  # its own selections planned other arms: nothing to compare like for like
            committed = ", ".join(arm["name"] for arm in payload["arms"])
            echo(f"[check {name}] VERDICT: DISAGREES: the rerun's own selections planned arm(s) "
                 f"{', '.join(error.arms)}, which the committed run (arms {committed}) did not train")
            write_json_atomic(folder / CHECK_JSON, {**record, "agrees": False, "unplanned_arms": error.arms,
                                                    "arms": []})
            return False
    reruns = {arm["name"]: arm for arm in rerun["arms"]}
    agreements = []
    for arm in payload["arms"]:
        if arm["name"] not in reruns:
            raise ValueError(f"arm {arm['name']} of the committed report is not in the rerun")
        agreement = compare_arm(arm, reruns[arm["name"]], exact=exact)
        for row in agreement.rows:
            echo(run_line(name, arm["name"], row))
        agreements.append(agreement)
    for agreement in agreements:
        echo(f"[check {name}] {agreement.verdict()}")
    agree = all(a.agrees for a in agreements)
    failing = [a.name for a in agreements if not a.agrees]
    echo(f"[check {name}] VERDICT: " + (f"all {len(agreements)} arms agree with the committed runs" if agree else
                                       f"{len(failing)} of {len(agreements)} arms disagree: {', '.join(failing)}"))
    write_json_atomic(folder / CHECK_JSON, {**record, "agrees": agree, "arms": [asdict(a) for a in agreements]})
    return agree
