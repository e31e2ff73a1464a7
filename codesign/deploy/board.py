"""What every on-board trainer shares: binding a design point's IPs on an overlay, and the IPs' figures.

Each PE family's board trainer is its golden loop on a backend that sends
the layer work to IPs (:mod:`codesign.deploy.training`, ``csb_training``,
``tt_training``); this mixin holds the part that does not depend on the
family: refuse an overlay that does not implement the design point, find the
instances of a PE, and report the IPs' calls, busy time and modelled cycles,
and the energy of the last :meth:`OnBoard.fit` (PMBus rails on a board,
:mod:`codesign.deploy.energy`).
"""

from __future__ import annotations

import time
from typing import Any, Iterable, Mapping, Optional

from codesign.deploy.driver import AccelIP
from codesign.deploy.energy import GROUPS, PowerSampler, measure_rails
from codesign.deploy.manifest import DeployError, check_design, setup_from_manifest
from codesign.step.model import StageLog, model_figures

NO_MODELLED_ENERGY = ("the loop has no modelled energy figure (its throughput() and history rows carry none), and "
                      "the emulated board has no power rails to read")


class OnBoard:
    """Mixin of a board trainer: ``self.overlay`` and the drivers its backend calls."""

    overlay = None
    energy: dict[str, Any] | None = None  # of the last fit (None before one)
    power_interval_s = 0.05  # seconds between two readings of the PMBus rails

    def bind(self, overlay, design=None) -> None:
        """Bind ``overlay``; with a design point (on a desktop), first check that the overlay implements it
        (same IPs, PEs, specs and board). Nothing runs before."""
        if design is not None:
            check_design(overlay.manifest, design)
        self.overlay = overlay

    def loop_setup(self, family: str, setup_class, changes: Mapping[str, Any]):
        """The set-up of the design's golden loop as design.json records it, with ``changes`` applied.

        A design.json without a loop of ``family`` (another PE family, or a
        design with several IPs) is refused with what it holds.
        """
        manifest = self.overlay.manifest
        entry = manifest.get("loop")
        if not isinstance(entry, Mapping) or entry.get("family") != family:
            held = "no loop" if not isinstance(entry, Mapping) else f"a {entry.get('family')!r} loop"
            raise DeployError(f"design {manifest['design']!r}: design.json records {held}; this trainer runs the "
                              f"{family!r} loop")
        return setup_from_manifest(manifest, setup_class, changes)

    def instance_name(self, pe: str, ip: str | None) -> str:
        """``ip`` if given, else the name of the overlay's single ``pe`` IP."""
        if ip is not None:
            return ip
        names = [entry["name"] for entry in self.overlay.manifest["ips"] if entry["pe"] == pe]
        if len(names) != 1:
            raise DeployError(f"the design has {len(names)} {pe} IPs ({', '.join(names) or 'none'}); "
                              "name the IP to train on with ip=...")
        return names[0]

    def ip_figures(self, drivers: Iterable[AccelIP], pe_cycles: int, stages: StageLog) -> dict[str, Any]:
        """IP calls, seconds from ap_start to ap_done, the PE cycles of the RTL cycle model at the design's clock,
        ``model``: the step model's PE and memory seconds per training step that ran on the IPs
        (:mod:`codesign.step.model`, on design.json's board; set it beside the measured ``seconds_per_step``),
        and ``energy``: the energy of the last :meth:`fit` (None before one).

        The cycle model counts the PEs' streams only: the shell's DDR
        transfers and the host's work are left out, so a board takes longer.
        """
        drivers = list(drivers)
        manifest = self.overlay.manifest
        clock_hz = float(manifest["clock_mhz"]) * 1e6
        steps = self._steps_trained()
        training = self.__dict__.get("_training_stages")
        if training is not None:  # per step that ran on the IPs (a CSB warm-up step runs on the host)
            model = model_figures(training, manifest, self._ip_steps)
            wall = self._ip_wall_s / self._ip_steps
        else:  # stages logged outside train_step (the torch TT loop's fit) include its evaluations
            model = model_figures(stages, manifest, steps)
            wall = self._wall_seconds() / steps if steps else None
        if model is not None:
            model["evaluation_included"] = training is None
        return {"ip_calls": sum(d.calls for d in drivers), "ip_busy_s": sum(d.busy_s for d in drivers),
                "emulated": bool(self.overlay.emulated), "pe_cycles": pe_cycles, "pe_model_s": pe_cycles / clock_hz,
                "model": model,
                "seconds_per_step": wall,
                "energy": None if self.energy is None else dict(self.energy)}

    step_wall_s = 0.0  # wall seconds of the steps taken (host and IPs; the emulated board's, off a board)

    def _wall_seconds(self) -> float:
        """Wall seconds of the steps taken: the loop's own count where it keeps one (the torch TT loop's
        ``step_seconds``, epoch-end evaluations included), else :meth:`train_step`'s."""
        return float(getattr(self, "step_seconds", self.step_wall_s))

    stage_log: Optional[StageLog] = None  # the IP backend's log of stages, where the trainer has one

    def train_step(self, *args, **kwargs):
        """The loop's step, timed (``step_wall_s``), its stages kept apart from evaluations': the measured figure
        and the model's (:meth:`ip_figures`) then cover the same work."""
        log = self.stage_log
        before = len(log.stages) if log is not None else 0
        started = time.perf_counter()
        loss = super().train_step(*args, **kwargs)
        seconds = time.perf_counter() - started
        self.step_wall_s += seconds
        if log is not None and len(log.stages) > before:
            training = self.__dict__.setdefault("_training_stages", StageLog())
            training.stages.extend(log.stages[before:])
            self._ip_steps = self.__dict__.get("_ip_steps", 0) + 1
            self._ip_wall_s = self.__dict__.get("_ip_wall_s", 0.0) + seconds
        return loss

    # -- energy

    def fit(self, *args, **kwargs):
        """The loop's ``fit`` (same arguments, same history), and ``self.energy`` for this call.

        On a board with PMBus power rails (:func:`codesign.deploy.energy.measure_rails`)
        the rails are sampled through the whole call (the steps and the
        epoch-end evaluations; static power included) and ``self.energy`` is
        ``{"source": "pmbus", "board", "steps", "seconds", "samples",
        "interval_s", "joules": {PS, PL, other}, "joules_per_step": {PS, PL,
        other}, "watts": {...}, "joules_by_rail", "rail_groups"}``, joules
        per step being the call's joules over the steps it trained (None
        for no step). On the emulated board ``source`` is ``"modelled"``:
        ``joules_per_step`` is the loop's own modelled figure where it has
        one (the TT loop's cost ledger, ``energy_pj`` of its history rows),
        otherwise None with the ``reason``. On a board without rails
        ``source`` is ``"unavailable"``, with the reason.
        """
        overlay = self.overlay
        emulated = overlay is None or bool(overlay.emulated)
        if emulated:
            rails = {}
        else:  # read once per trainer: libsensors is set up on every get_rails
            rails = self.__dict__.get("_power_rails")
            if rails is None:
                rails = self._power_rails = measure_rails()
        steps_before = self._steps_trained()
        if not rails:
            history = super().fit(*args, **kwargs)
            steps = self._steps_trained() - steps_before
            self.energy = (self._modelled_energy(history, steps) if emulated else
                           {"source": "unavailable", "board": self._board_name(), "steps": steps,
                            "joules_per_step": None,
                            "reason": f"no PMBus power rail with a power sensor found on this "
                                      f"{self._board_name()} (pynq.pmbus.get_rails)"})
            return history
        sampler = PowerSampler(rails, interval_s=self.power_interval_s)
        with sampler:
            history = super().fit(*args, **kwargs)
        record = sampler.result
        steps = self._steps_trained() - steps_before
        self.energy = {"source": record.source, "board": self._board_name(), "steps": steps,
                       "seconds": record.seconds, "samples": record.samples, "interval_s": record.interval_s,
                       "joules": dict(record.joules),
                       "joules_per_step": ({group: record.joules[group] / steps for group in GROUPS} if steps
                                           else None),
                       "watts": record.watts(), "joules_by_rail": dict(record.joules_by_rail),
                       "rail_groups": dict(record.groups)}
        return history

    def _board_name(self) -> str:
        return str(self.overlay.manifest.get("board", "board")) if self.overlay is not None else "board"

    def _steps_trained(self) -> int:
        """The loop's step counter (``step`` of the FB and CSB loops, ``steps`` of the TT loop)."""
        for name in ("step", "steps"):
            value = getattr(self, name, None)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        raise DeployError(f"{type(self).__name__}: the loop counts no steps (no integer step or steps)")

    def _modelled_energy(self, history, steps: int) -> dict[str, Any]:
        """The loop's modelled energy of this fit: the cumulative ``energy_pj`` of its last history row since the
        previous fit's, over the steps; None with the reason where the rows carry no such figure."""
        rows = list(history or [])
        last = rows[-1].get("energy_pj") if rows and isinstance(rows[-1], Mapping) else None
        if last is None:
            return {"source": "modelled", "steps": steps, "joules_per_step": None, "reason": NO_MODELLED_ENERGY}
        seen, self._modelled_pj_seen = getattr(self, "_modelled_pj_seen", 0.0), float(last)
        joules = (float(last) - seen) * 1e-12
        return {"source": "modelled", "steps": steps, "joules": joules,
                "joules_per_step": joules / steps if steps else None,
                "model": "the loop's cost ledger (energy_pj of its history rows: MAC and DRAM energy by the "
                         "45 nm table of codesign.energy); the PE arithmetic, not the FPGA's rails: no PS/PL split"}


class LoopOnBoard(OnBoard):
    """A NumPy loop family's board trainer (FB-float, CSB): the golden loop on an IP backend.

    A loop family's trainer names its ``family`` (the PE and design.json's
    ``loop``), its loop's ``setup_class`` and its IP backend's
    ``backend_class``; ``Trainer(overlay)`` then takes the IP named ``ip``
    (default: the design's single IP of that PE) and the set-up design.json
    records (:meth:`loop_setup`), with ``setup_changes`` (epochs, batch
    size...) applied as they would be on the golden run. ``design``, a
    design point, is checked against the overlay first (a desktop's guard).
    """

    family: str
    setup_class: type
    backend_class: type  # built as backend_class(driver, spec); has driver, pe_cycles and stages

    def __init__(self, overlay, design=None, *, ip: Optional[str] = None, **setup_changes) -> None:
        self.bind(overlay, design)
        setup = self.loop_setup(self.family, self.setup_class, setup_changes)
        driver = overlay.accelerator(self.instance_name(self.family, ip))
        self.ip_backend = self.backend_class(driver, setup.spec)
        super().__init__(setup, self.ip_backend)

    @property
    def stage_log(self) -> StageLog:
        return self.ip_backend.stages

    def backend_figures(self) -> dict[str, Any]:
        """Figures of the IP backend beyond the shared ones (a family adds its own, e.g. transactions sent)."""
        return {}

    def throughput(self) -> dict[str, Any]:
        """The golden loop's figures plus the IP's (:meth:`OnBoard.ip_figures`) and the backend's own."""
        backend = self.ip_backend
        return {**super().throughput(), **self.ip_figures([backend.driver], backend.pe_cycles, backend.stages),
                **self.backend_figures()}
