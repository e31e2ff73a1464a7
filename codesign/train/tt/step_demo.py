"""A TT layer through every level: the golden layer's training step, the same step as PE calls on the golden
kernels, through the generated HLS C++ (g++) and through the RTL (cocotb), with the cycle model beside the RTL.

:func:`demo_layer_step` is what ``codesign demo`` shows for the TT PEs; it
writes ``tt_layer_step.json`` and ``tt_layer_step.md`` atomically and
returns whether every level that ran agreed bit for bit (and the RTL cycles
with the model).
"""

from __future__ import annotations

import math
import shutil
import time
from pathlib import Path

import numpy as np
import torch

from codesign.hw.csim import CsimError
from codesign.io.reports import write_json_atomic, write_text_atomic
from codesign.step.tt.schedule import StepHardware
from codesign.step.tt.step import GoldenRunner, checked_values, compare_steps, pe_step, step_plan
from codesign.step.tt.cycles import rtl_check, step_cycles
from codesign.train.tt.layer import TTLinear
from codesign.train.tt.pe_check import golden_step, layer_state
from codesign.train.tt.precision import TTPrecision

# a small layer of the digits reproduction's shape: 64 inputs = 2*4*4*2, 256 outputs = 4*4*4*4, ranks 2,
# a batch of 6 (no multiple of 16); its RTL run takes a few seconds with Icarus
DEMO_LAYER = {"in_modes": (2, 4, 4, 2), "out_modes": (4, 4, 4, 4), "max_rank": 2, "batch": 6, "seed": 2026}
RTL_TOLERANCE = 0.05  # cycle model vs RTL
CLOCK_MHZ = 100.0  # the PL clock the seconds are given at (paper 003's)


def demo_inputs(in_modes=DEMO_LAYER["in_modes"], out_modes=DEMO_LAYER["out_modes"], max_rank=DEMO_LAYER["max_rank"],
                batch=DEMO_LAYER["batch"], seed=DEMO_LAYER["seed"]):
    """The demo's layer (4-bit cores, 8-bit activations, 16-bit gradients), a ReLU-like batch and an output gradient."""
    torch.manual_seed(seed)
    layer = TTLinear(math.prod(in_modes), math.prod(out_modes), in_modes=tuple(in_modes), out_modes=tuple(out_modes),
                     max_rank=max_rank, precision=TTPrecision())
    rng = np.random.default_rng(seed)
    x = np.maximum(rng.normal(size=(batch, layer.in_features)), 0).astype(np.float32)
    grad_y = (rng.normal(size=(batch, layer.out_features)) * 0.01).astype(np.float32)
    return layer, x, grad_y


def _markdown(report: dict) -> str:
    layer = report["layer"]
    lines = ["# TT layer training step through every level", "",
             f"Layer {math.prod(layer['in_modes'])} -> {math.prod(layer['out_modes'])}: in_modes "
             f"{tuple(layer['in_modes'])}, out_modes {tuple(layer['out_modes'])}, ranks {tuple(layer['ranks'])}, "
             f"batch {layer['batch']}; 4-bit cores, 8-bit activations, 16-bit gradients. Expected values: the golden "
             "TTLinear's own forward and backward in training mode.", "",
             "| level | PE calls | values compared | mismatches | note |", "|---|---:|---:|---:|---|"]
    for level in report["levels"]:
        lines.append(f"| {level['level']} | {level.get('calls', '')} | {level.get('values', '')} | "
                     f"{level.get('mismatches', '')} | {level.get('note', '')} |")
    lines += ["", "| contraction | PE | calls | MACs | model cycles |", "|---|---|---:|---:|---:|"]
    for row in report["schedule"]:
        lines.append(f"| {row['name']} | {row['pe']} | {row['calls']} | {row['macs']} | {row['cycles']} |")
    total, makespan = report["model_cycles"], report["model_makespan"]
    lines += ["", f"Modelled step: {total} cycles with the calls one after another, {makespan} scheduled on the "
                  f"PEs ({makespan / (CLOCK_MHZ * 1e6) * 1e6:.1f} us at {CLOCK_MHZ:.0f} MHz).", "",
              f"**{'PASS' if report['passed'] else 'FAIL'}**", ""]
    return "\n".join(lines)


def demo_layer_step(out_dir: Path, progress=print, *, rtl: bool = True, hardware: StepHardware = StepHardware()) -> bool:
    """Run the demo layer's step at every level; write ``tt_layer_step.{json,md}`` in ``out_dir``; True if all agree.

    Levels: ``pe-golden`` (schedule on the golden PE kernels), ``csim``
    (generated HLS C++ of PE1/PE2/PE3 compiled with g++), ``rtl`` (every call
    through ``rtl/tt`` under cocotb + Icarus, words and summed cycles against
    the model, within 5 %). A level whose tools are missing is reported as
    skipped with the reason and does not fail the demo; ``rtl=False`` leaves
    the RTL out.
    """
    out_dir = Path(out_dir)
    layer, x, grad_y = demo_inputs()
    state = layer_state(layer)
    plan = step_plan(state, x.shape[0], hardware)
    cycles = step_cycles(plan)
    progress(f"[tt step] layer {layer.in_features} -> {layer.out_features}, ranks {layer.ranks}, batch {x.shape[0]}: "
             f"{len(plan.contractions)} contractions, {len(plan.calls)} PE calls")
    expected = golden_step(layer, x, grad_y)
    values = checked_values(expected)
    levels = []

    def level(name, runner, note):
        started = time.perf_counter()
        got = pe_step(state, x, grad_y, runner, hardware)
        mismatches = sum(compare_steps(expected, got).values())
        levels.append({"level": name, "calls": runner.calls, "values": values, "mismatches": mismatches,
                       "seconds": round(time.perf_counter() - started, 3), "note": note})
        progress(f"[tt step] {name}: {values} values, {mismatches} mismatches")

    level("pe-golden", GoldenRunner(), "schedule on the golden PE kernels")
    work = out_dir / "tt_layer_step_work"
    try:
        from codesign.step.tt.csim import CsimRunner

        started = time.perf_counter()
        runner = CsimRunner(hardware, work / "csim")
        level("csim", runner, f"generated HLS C++, g++ (build {time.perf_counter() - started:.1f} s)")
    except CsimError as error:
        first = str(error).splitlines()[0]
        if shutil.which("g++") is None or "ap_types" in str(error):  # a tool is missing: nothing was tried
            levels.append({"level": "csim", "skipped": first, "note": f"skipped: {first}"})
            progress(f"[tt step] csim skipped: {first}")
        else:  # the generated code did not build or run: a failure
            levels.append({"level": "csim", "failed": str(error), "note": f"failed: {first}"})
            progress(f"[tt step] csim failed: {error}")
    if rtl:
        reason = _rtl_missing()
        if reason:
            levels.append({"level": "rtl", "skipped": reason, "note": f"skipped: {reason}"})
            progress(f"[tt step] rtl skipped: {reason}")
        else:
            check = rtl_check(state, x, grad_y, work / "rtl", hardware=hardware)
            ok = check.mismatches == 0 and abs(check.deviation) <= RTL_TOLERANCE \
                and abs(check.model_makespan - check.rtl_makespan) <= RTL_TOLERANCE * check.rtl_makespan
            levels.append({"level": "rtl", "calls": check.calls, "values": f"{check.calls} transactions",
                           "mismatches": check.mismatches, "seconds": round(check.seconds, 3),
                           "rtl_cycles": check.rtl_cycles, "model_cycles": check.model_cycles,
                           "rtl_makespan": check.rtl_makespan, "model_makespan": check.model_makespan,
                           "cycles_ok": ok, "note": f"cocotb + Icarus; RTL {check.rtl_cycles} cycles, model "
                                                    f"{check.model_cycles} ({check.deviation:+.2%}); scheduled "
                                                    f"{check.rtl_makespan} vs {check.model_makespan}"})
            progress(f"[tt step] rtl: {check.calls} calls, {check.mismatches} mismatches, {check.rtl_cycles} cycles "
                     f"(model {check.model_cycles}), scheduled {check.rtl_makespan} (model {check.model_makespan})")
    passed = all(entry.get("mismatches", 0) == 0 and entry.get("cycles_ok", True) and "failed" not in entry
                 for entry in levels)
    report = {
        "layer": {"in_modes": list(layer.in_modes), "out_modes": list(layer.out_modes), "ranks": list(layer.ranks),
                  "batch": int(x.shape[0])},
        "hardware": {name: hardware.spec(name).to_dict() for name in ("tt1", "tt2", "tt3")},
        "schedule": [{"name": c.name, "pe": c.pe, "calls": c.calls, "macs": c.macs, "cycles": c.cycles}
                     for c in cycles.contractions],
        "model_cycles": cycles.total, "model_makespan": cycles.makespan, "levels": levels, "passed": passed,
    }
    write_json_atomic(out_dir / "tt_layer_step.json", report)
    write_text_atomic(out_dir / "tt_layer_step.md", _markdown(report))
    progress(f"[tt step] {'PASS' if passed else 'FAIL'}; report in {out_dir / 'tt_layer_step.md'}")
    return passed


def _rtl_missing() -> str:
    if shutil.which("iverilog") is None:
        return "Icarus Verilog (iverilog) is not on PATH"
    try:
        import cocotb_tools.runner  # noqa: F401
    except ImportError:
        return "cocotb 2.x is not installed"
    return ""
