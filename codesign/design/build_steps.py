"""A build as named steps that can be started, stopped and resumed, each timed and recorded in the build folder.

The steps, in order:

* ``folder``: the fit against the board's budget, design.json, every IP's HLS project (and RTL project on the RTL
  route), the Vivado scripts, README.md (:func:`codesign.design.build.write_build_folder`; seconds, no tools);
* ``hls``: ``vitis_hls`` on every IP of the HLS route: C simulation, synthesis, C/RTL co-simulation (skipped with
  ``cosim=False``: the project's run_hls.tcl reads ``CODESIGN_SKIP_COSIM``), export; nothing on the RTL route;
* ``vivado``: the block design, implementation and bitstream (``.bit`` and ``.hwh``).

``build_steps.json`` in the build folder records every step run: its status, seconds, when it ended, and a hash of
its inputs (the files it reads). A later build skips a step whose inputs have not changed since it was done and
whose outputs are still there, so a build stopped after hours of HLS goes on with Vivado.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Sequence

from codesign.design.build import BuildFolder, write_build_folder
from codesign.design.point import DesignPoint
from codesign.io.jsonfile import JsonFileError, load_json
from codesign.io.reports import write_json_atomic
from codesign.shell import vivado
from codesign.shell.build import HLS_TOOLS, ToolFailed, ToolMissing

BUILD_STEPS = ("folder", "hls", "vivado")
STEP_TEXT = {"folder": "fit, design.json, HLS and RTL projects, Vivado scripts, README (no tools)",
             "hls": "vitis_hls per HLS-route IP: C simulation, synthesis, co-simulation (optional), export",
             "vivado": "block design, implementation, bitstream and hand-off (.bit, .hwh)"}
STEPS_FILE = "build_steps.json"
SKIP_COSIM = "CODESIGN_SKIP_COSIM"  # run_hls.tcl skips cosim_design when this is set


@dataclass(frozen=True)
class StepRecord:
    """One step of one build: ``status`` (done, unchanged, tool missing, failed, not run), ``seconds``, ``ended``
    (Unix time), ``inputs`` (the hash of what it read) and ``detail`` (a command to run, an error)."""

    step: str
    status: str
    seconds: float = 0.0
    ended: float = 0.0
    inputs: str = ""
    detail: str = ""


def selected_steps(from_step: str | None = None, to_step: str | None = None) -> tuple[str, ...]:
    """The steps from ``from_step`` to ``to_step`` (both included; default: all), in order."""
    for name in (from_step, to_step):
        if name is not None and name not in BUILD_STEPS:
            raise ValueError(f"unknown build step {name!r}; the steps are {', '.join(BUILD_STEPS)}")
    first = BUILD_STEPS.index(from_step) if from_step else 0
    last = BUILD_STEPS.index(to_step) if to_step else len(BUILD_STEPS) - 1
    if first > last:
        raise ValueError(f"--from-step {from_step} comes after --to-step {to_step} ({' -> '.join(BUILD_STEPS)})")
    return BUILD_STEPS[first:last + 1]


def read_records(out_dir: Path) -> dict[str, dict]:
    """The recorded steps of the build folder ``out_dir`` (none before its first build)."""
    path = Path(out_dir) / STEPS_FILE
    if not path.is_file():
        return {}
    try:
        return load_json(path, what="build step record", required={"steps": dict})["steps"]
    except JsonFileError:
        return {}  # a damaged record is no reason to skip anything: every step runs again


def _hash_files(root: Path, files: Sequence[Path]) -> str:
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _hls_projects(folder: BuildFolder) -> list[Path]:
    return [where for where in (where for where, _ in folder.hls_commands) if where.is_dir()]


def _hls_sources(folder: BuildFolder) -> list[Path]:
    """The files codesign wrote into each HLS-route project (flat; the tool writes its project below and logs)."""
    return [path for where in _hls_projects(folder) for path in where.iterdir()
            if path.is_file() and path.suffix != ".log"]


RTL_SOURCES = (".v", ".sv", ".vh", ".tcl", ".json", ".xdc")


def step_inputs(folder: BuildFolder, step: str) -> str:
    """The hash of what ``step`` reads: the HLS projects' sources (``hls``); those, the RTL projects' sources and
    the Vivado scripts (``vivado``)."""
    files = _hls_sources(folder)
    if step == "vivado":
        files += sorted((folder.root / "vivado").glob("*.tcl"))
        for ip in folder.manifest["ips"]:
            if ip.get("rtl_project"):
                files += [path for path in (folder.root / ip["rtl_project"]).rglob("*")
                          if path.is_file() and path.suffix in RTL_SOURCES]
    return _hash_files(folder.root, files)


def _outputs_present(folder: BuildFolder, step: str) -> bool:
    if step == "hls":
        return all(any(where.glob("*/*/impl/ip")) for where in _hls_projects(folder))
    design = folder.manifest["design"]
    return all((folder.root / f"{design}.{suffix}").is_file() for suffix in ("bit", "hwh"))


def _run_hls(folder: BuildFolder, *, cosim: bool, progress: Callable[[str], None]) -> str:
    commands = folder.hls_commands
    if not commands:
        return "no IP on the HLS route"
    tool = next((name for name in HLS_TOOLS if shutil.which(name)), None)
    if tool is None:
        raise ToolMissing("vitis_hls is not on PATH; run: " + "; ".join(f"cd {where} && {' '.join(command)}"
                                                                       for where, command in commands))
    env = {**os.environ, **({} if cosim else {SKIP_COSIM: "1"})}
    for where, command in commands:
        progress(f"[build hls] {where}: {' '.join(command)}" + ("" if cosim else " (no co-simulation)"))
        code = subprocess.run([tool, *command[1:]], cwd=where, check=False, env=env).returncode
        if code:
            raise ToolFailed(f"{tool} failed in {where} (exit {code}) running run_hls.tcl; see "
                             f"{where / 'vitis_hls.log'}")
    from codesign.design.hls_reports import refresh_fit

    refresh_fit(folder.root, folder.fit, folder.manifest)
    return f"{len(commands)} IP(s)" + ("" if cosim else ", co-simulation skipped")


def _run_vivado(folder: BuildFolder, progress: Callable[[str], None]) -> str:
    result = vivado.run_vivado_build(vivado.plan_vivado_build(folder.root))
    progress(f"[build vivado] bitstream {result.bitstream} and hand-off {result.handoff} in {result.seconds:.0f} s")
    return f"{result.bitstream.name}, {result.handoff.name}"


def run_steps(design: DesignPoint, out_dir: Path, *, cache_dir: Path, steps: Sequence[str] = BUILD_STEPS,
              limit_percent: float, route: str, cosim: bool = True,
              progress: Callable[[str], None] | None = print) -> tuple[BuildFolder, list[StepRecord]]:
    """Run ``steps`` (in order) of ``design``'s build in ``out_dir``; each recorded as it ends. A step that fails
    raises after its record is written; a missing tool ends the build there (recorded ``tool missing``).
    ``progress`` None: quiet (the fit's Yosys lines too)."""
    out_dir = Path(out_dir)
    if "folder" not in steps and not (out_dir / "design.json").is_file():
        raise ValueError(f"--from-step {steps[0]}: {out_dir} holds no build folder yet; start from the folder step")
    folder = write_build_folder(design, out_dir, cache_dir=cache_dir, limit_percent=limit_percent,
                                progress=progress is not None, route=route)
    progress = progress or (lambda _: None)
    records = read_records(out_dir)
    done: list[StepRecord] = []
    for step in steps:
        started = time.time()
        inputs = "" if step == "folder" else step_inputs(folder, step)
        earlier = records.get(step, {})
        if step != "folder" and earlier.get("status") == "done" and earlier.get("inputs") == inputs \
                and _outputs_present(folder, step):
            record = StepRecord(step, "unchanged", 0.0, time.time(), inputs, "inputs unchanged since it was done")
        else:
            try:
                detail = (f"{len(folder.written)} files" if step == "folder" else
                          _run_hls(folder, cosim=cosim, progress=progress) if step == "hls" else
                          _run_vivado(folder, progress))
                record = StepRecord(step, "done", time.time() - started, time.time(), inputs, detail)
            except ToolMissing as missing:
                record = StepRecord(step, "tool missing", time.time() - started, time.time(), inputs, str(missing))
            except ToolFailed as failed:
                _record(out_dir, records, StepRecord(step, "failed", time.time() - started, time.time(), inputs,
                                                     str(failed)))
                raise
        _record(out_dir, records, record)
        done.append(record)
        progress(f"[build] step {step}: {record.status} in {record.seconds:.1f} s ({record.detail})")
        if record.status == "tool missing":
            break
    return folder, done


def _record(out_dir: Path, records: dict, record: StepRecord) -> None:
    records[record.step] = asdict(record)
    write_json_atomic(Path(out_dir) / STEPS_FILE, {"steps": records})


def describe_steps(out_dir: Path | None = None) -> str:
    """The steps, what each does and, for an existing build folder, what its record says."""
    records = read_records(Path(out_dir)) if out_dir is not None else {}
    lines = []
    for step in BUILD_STEPS:
        seen = records.get(step)
        state = f"  [{seen['status']}, {seen['seconds']:.1f} s]" if seen else ""
        lines.append(f"{step:7s} {STEP_TEXT[step]}{state}")
    return "\n".join(lines)


__all__ = ["BUILD_STEPS", "STEPS_FILE", "StepRecord", "describe_steps", "read_records", "run_steps",
           "selected_steps", "step_inputs"]
