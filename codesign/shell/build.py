"""Run the vendor flow of a generated project where Xilinx tools are installed; say plainly when they are not.

Nothing here pretends: without ``vitis_hls`` on PATH no synthesis result is
produced, only the exact command that would run.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from codesign.io.project import read_project_marker
from codesign.hw.render import MANIFEST_NAME

HLS_TOOLS = ("vitis_hls", "vivado_hls")


class ToolMissing(RuntimeError):
    """A vendor tool the step needs is not on PATH."""


class ToolFailed(RuntimeError):
    """A vendor tool ran and failed; the message names the step, where it ran and its log."""


@dataclass(frozen=True)
class BuildPlan:
    project_dir: Path
    tool: str | None
    command: list[str]

    def describe(self) -> str:
        return f"cd {self.project_dir} && {' '.join(self.command)}"


def plan_hls_build(project_dir: Path) -> BuildPlan:
    """The command that builds ``project_dir``; validates that it is a codesign project first."""
    project_dir = Path(project_dir)
    manifest = project_dir / MANIFEST_NAME
    if not manifest.is_file():
        raise FileNotFoundError(f"{project_dir} is not a codesign project (no {MANIFEST_NAME}); run `codesign generate` first")
    read_project_marker(project_dir)  # a corrupt or foreign manifest is refused, naming the file
    if not (project_dir / "run_hls.tcl").is_file():
        raise FileNotFoundError(f"{project_dir} has no run_hls.tcl")
    tool = next((name for name in HLS_TOOLS if shutil.which(name)), None)
    return BuildPlan(project_dir, tool, [tool or HLS_TOOLS[0], "-f", "run_hls.tcl"])


def run_hls_build(plan: BuildPlan) -> int:
    """Run the plan; raise :class:`ToolMissing` (with the command) when no HLS tool is installed."""
    if plan.tool is None:
        raise ToolMissing(
            f"none of {', '.join(HLS_TOOLS)} is on PATH; install Vitis HLS (2022.1 or later) and run: {plan.describe()}"
        )
    code = subprocess.run(plan.command, cwd=plan.project_dir, check=False).returncode
    if code:
        raise ToolFailed(f"{plan.command[0]} failed in {plan.project_dir} (exit {code}) running run_hls.tcl (C "
                         f"simulation, synthesis, co-simulation, export); see {plan.project_dir / 'vitis_hls.log'}")
    return 0
