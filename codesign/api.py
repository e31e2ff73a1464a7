"""One Python object for a design, for notebooks: what the command line does, as methods.

A :class:`Design` holds one design point (a training configuration and its hardware, as a design TOML describes
them) and does with it what ``codesign design``, ``verify``, ``explore``, ``build``, ``bundle`` and ``train`` do,
plus training on an overlay (a board, or the emulated board) and handing the trained weights back as float NumPy
arrays or a torch ``state_dict``::

    from codesign.api import Design

    design = Design.from_toml("examples/digits_abvs.toml", board="ultra96v2")
    design.fit()                       # the Yosys fit against the board's budget
    history = design.train(epochs=5)   # the golden loop of its training family (NumPy)
    weights = design.weights()         # [{"weight": (out, in) float32, "bias": (out,) or None}, ...]
    state = design.state_dict()        # the same for torch: codesign.train.models.MLP's names

Every method checks what it is given before it writes anything, as the commands do; outputs go to the folders
given, under the same output-folder rule.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from codesign.design import load_design
from codesign.design.point import DesignPoint, design_from_dict
from codesign.io.cache import cache_dir
from codesign.shell.build import ToolMissing


class Design:
    """A design point and what was trained on it (see the module's text). Build one with :meth:`from_toml` or
    :meth:`from_config`."""

    def __init__(self, point: DesignPoint, *, raw: dict | None = None) -> None:
        self.point = point
        self._raw = raw  # the TOML tables, which the explorer reads (None: rebuilt from the point's fields)
        self.trainer = None  # the last golden or board trainer, after train() or train_on()

    # -- making one

    @classmethod
    def from_toml(cls, path, *, board: str | None = None) -> Design:
        """The design a TOML file describes (a training configuration with an optional ``[design]`` table);
        ``board`` wins over the file's."""
        from codesign.train.config import read_toml, resolve_data_path

        raw = resolve_data_path(read_toml(Path(path), what="design file"), Path(path))
        return cls(load_design(Path(path), board_name=board), raw=raw)

    @classmethod
    def from_config(cls, *, model: dict, data: dict | None = None, optim: dict | None = None,
                    techniques: dict | None = None, seed: int = 0, name: str = "design", board: str = "zedboard",
                    clock_mhz: float = 100.0, pe: dict | None = None) -> Design:
        """A design from keyword arguments, the tables a TOML file would hold: ``model={"name": "mlp", "hidden":
        [64]}``, ``techniques={"abvs": {"fb_min": 6, "fb_max": 9}}``, ``pe={"fpmac_array": {"rows": 4}}``..."""
        raw = {"seed": seed, "model": dict(model), "data": dict(data or {}), "optim": dict(optim or {}),
               "techniques": {key: dict(value) for key, value in (techniques or {}).items()},
               "design": {"name": name, "board": board, "clock_mhz": clock_mhz, "pe": dict(pe or {})}}
        return cls(design_from_dict({**raw, "design": dict(raw["design"])}), raw=raw)

    # -- what it is

    @property
    def name(self) -> str:
        return self.point.name

    @property
    def board(self) -> str:
        return self.point.board.name

    def describe(self) -> str:
        """The instances, why each is needed, and the board."""
        return self.point.describe()

    def __repr__(self) -> str:
        pes = ", ".join(instance.name for instance in self.point.instances)
        return f"Design({self.name!r} on {self.board}: {pes})"

    # -- hardware

    def fit(self, *, limit_percent: float = 90.0, cache: Path | None = None):
        """The fit report: each IP's Yosys estimate against the board's budget (``.fits``, ``.table()``)."""
        from codesign.design.fit import fit_design

        return fit_design(self.point, cache_dir=Path(cache) if cache else cache_dir() / "estimates",
                          limit_percent=limit_percent)

    def verify(self, out, *, levels: tuple[str, ...] = ("golden", "csim", "rtl")) -> dict[str, Any]:
        """Every IP's PE verified golden ≡ C-sim ≡ RTL at its spec, in ``out/<ip>``; the reports by IP name
        (``.passed``, ``.table()``)."""
        from codesign.hw.flow import check_levels, verify
        from codesign.hw.target import BuildTarget
        from codesign.io.outdir import output_dir
        from codesign.pe import get_pe

        levels = check_levels(levels)
        target = BuildTarget(part=self.point.board.part, clock_period_ns=self.point.clock_period_ns)
        reports = {}
        with output_dir(Path(out), "verify") as root:
            for instance in self.point.instances:
                pe = get_pe(instance.pe)
                reports[instance.name] = verify(pe, instance.spec, target=target, work_dir=root / instance.name,
                                                levels=levels, options=pe.stimulus_options(), progress=lambda _: None)
        return reports

    def explore(self, out, *, objective: str = "time", limit_percent: float = 80.0):
        """The explorer's priced space and chosen point (``codesign explore``), its reports written to ``out``."""
        from codesign.design.explore_run import explore_design, write_reports
        from codesign.io.outdir import check_output_dir, output_dir

        check_output_dir(Path(out), "explore")
        result = explore_design(self._tables(), self.point, objective=objective, cap=limit_percent / 100,
                                cache_dir=cache_dir() / "estimates")
        with output_dir(Path(out), "explore") as folder:
            write_reports(result, folder, board=self.point.board)
        return result

    def build(self, out, *, run_tools: bool = False, limit_percent: float = 90.0):
        """The build folder (design.json, the HLS and RTL projects, the Vivado Tcl) in ``out``; with ``run_tools``
        the build's steps go on with the vendor tools where installed (:class:`~codesign.shell.build.ToolMissing`
        names them if not; ``build_steps.json`` records each step)."""
        from codesign.design.build_steps import run_steps, selected_steps
        from codesign.shell.rtl_ip import DEFAULT_ROUTE

        folder, records = run_steps(self.point, Path(out), cache_dir=cache_dir() / "estimates",
                                    steps=selected_steps(to_step=None if run_tools else "folder"),
                                    limit_percent=limit_percent, route=DEFAULT_ROUTE, progress=None)
        missing = [record.detail for record in records if record.status == "tool missing"]
        if missing:
            raise ToolMissing(missing[0])
        return folder

    def bundle(self, out, *, build_dir=None):
        """The pip package a board installs (``codesign bundle``)."""
        from codesign.bundle import write_bundle

        return write_bundle(self.point, Path(out), build_dir=None if build_dir is None else Path(build_dir))

    # -- training

    def train(self, *, progress: bool = False, max_steps: int | None = None, **changes) -> list[dict]:
        """Train with the golden loop of the design's training family (NumPy, what the board runs), with
        ``changes`` to its set-up (``epochs=5``, ``lr=0.3``...); the history, one row per epoch."""
        from codesign.deploy.families import golden_trainer
        from codesign.design.families import loop_entry, untrainable
        from codesign.loops.data import as_arrays
        from codesign.train.trainer import load_dataset

        why = untrainable(self.point)
        if why:
            raise ValueError(why)
        self.trainer = golden_trainer({"design": self.name, "loop": loop_entry(self.point)}, **changes)
        return self.trainer.fit(as_arrays(load_dataset(self.point.training)), progress=progress, max_steps=max_steps)

    def overlay(self, build_dir=None, *, emulate: bool | None = None):
        """The overlay of a build folder (a board's bitstream), or of an emulation folder written here (the
        generated HLS C++ under g++) when ``build_dir`` is None."""
        from codesign.deploy import CodesignOverlay
        from codesign.design.build import write_emulation_folder

        if build_dir is None:
            build_dir = write_emulation_folder(self.point, Path(tempfile.mkdtemp(prefix="codesign_")) / self.board)
            emulate = True
        return CodesignOverlay(Path(build_dir), design=self.point, emulate=emulate)

    def train_on(self, overlay, *, progress: bool = False, max_steps: int | None = None, **changes) -> list[dict]:
        """Train through ``overlay``'s IPs (a board, or the emulated board) with the board runtime's trainer."""
        from codesign.deploy.families import board_trainer
        from codesign.loops.data import as_arrays
        from codesign.train.trainer import load_dataset

        self.trainer = board_trainer(overlay, **changes)
        return self.trainer.fit(as_arrays(load_dataset(self.point.training)), progress=progress, max_steps=max_steps)

    def weights(self) -> list[dict[str, Any]]:
        """The trained layers as float32 NumPy arrays: ``weight`` (outputs x inputs) and ``bias`` (or None)."""
        if self.trainer is None:
            raise ValueError(f"design {self.name}: nothing trained yet (call train() or train_on(overlay) first)")
        return self.trainer.float_weights()

    def state_dict(self) -> dict:
        """The trained weights as a torch ``state_dict`` of :class:`codesign.train.models.MLP` (``layers.<i>.weight``
        and ``.bias``; a layer without a bias gets zeros). Needs torch, which a board does not have."""
        import torch

        state = {}
        for index, layer in enumerate(self.weights()):
            weight = layer["weight"]
            bias = layer["bias"] if layer["bias"] is not None else weight[:, 0] * 0
            state[f"layers.{index}.weight"] = torch.from_numpy(weight.copy())
            state[f"layers.{index}.bias"] = torch.from_numpy(bias.copy())
        return state

    def _tables(self) -> dict:
        if self._raw is None:
            raise ValueError("explore needs the design's tables: make it with from_toml or from_config")
        return self._raw


__all__ = ["Design"]
