"""Energy of board training: the PMBus power sampler, the OnBoard fit that records it, and the emulated board's label.

The sampler runs on fake rails whose power is a known function of time; the
mixin on a fake loop (a board with fake rails, a board without, the
emulated board); the shipped FB design point on the emulated board; and,
on an attached Ultra96-V2, a few real steps with the rails read.
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

from codesign.step.model import StageLog
from codesign.deploy import board_attached
from codesign.deploy import board as board_module
from codesign.deploy.board import OnBoard
from tests.deploy.conftest import emulated_overlay
from codesign.deploy.energy import (
    PowerReadError,
    PowerSampler,
    measure_rails,
    rail_group,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "digits_abvs.toml"
INTERVAL = 0.02


class FakePower:
    """A power sensor whose reading is ``watts(seconds since creation)``; raises ``fail`` from read ``fail_at`` on."""

    def __init__(self, watts, fail_at: int | None = None, fail: Exception | None = None) -> None:
        self.watts, self.fail_at, self.fail = watts, fail_at, fail
        self.t0, self.reads = time.monotonic(), 0
        self.name = "fake_power"

    @property
    def value(self) -> float:
        self.reads += 1
        if self.fail_at is not None and self.reads >= self.fail_at:
            raise self.fail or OSError("I2C read timed out")
        return self.watts(time.monotonic() - self.t0)


def rail(watts, **kwargs) -> SimpleNamespace:
    return SimpleNamespace(power=FakePower(watts, **kwargs), voltage=None, current=None)


def constant(watts: float):
    return lambda _t: watts


# -- the sampler


def test_constant_power_integrates_to_power_times_time():
    rails = {"VCCINT": rail(constant(2.0)), "VCCPSINTFP": rail(constant(0.5))}
    started = time.monotonic()
    with PowerSampler(rails, interval_s=INTERVAL) as sampler:
        time.sleep(0.3)
    elapsed = time.monotonic() - started
    record = sampler.result
    assert record.source == "pmbus" and record.interval_s == INTERVAL
    assert 0.3 <= record.seconds <= elapsed
    assert record.samples >= 3  # the first, at least one from the thread, the last
    # the rule is exact for constant power over the sampled span; that span misses the first reading's set-up and
    # the thread's join at the ends of the measured one: within an interval (two, for a loaded machine)
    for name, watts in (("VCCINT", 2.0), ("VCCPSINTFP", 0.5)):
        assert record.joules_by_rail[name] == pytest.approx(watts * record.seconds, rel=1e-9)
        assert abs(record.joules_by_rail[name] - watts * elapsed) <= watts * 2 * INTERVAL
    assert record.joules == pytest.approx({"PS": 0.5 * record.seconds, "PL": 2.0 * record.seconds, "other": 0.0})
    assert record.watts() == pytest.approx({"PS": 0.5, "PL": 2.0, "other": 0.0})


def test_a_ramp_integrates_within_one_interval():
    slope = 10.0  # W/s from the start
    rails = {"VCCBRAM": rail(lambda t: slope * t)}
    rails["VCCBRAM"].power.t0 = time.monotonic()
    with PowerSampler(rails, interval_s=INTERVAL) as sampler:
        time.sleep(0.3)
    record = sampler.result
    # the trapezoid rule is exact for a linear power; what is left (a reading's time against its timestamp, the
    # start's delay) is far below what a shift of one interval would make
    expected = slope * record.seconds ** 2 / 2
    assert abs(record.joules["PL"] - expected) <= slope * record.seconds * INTERVAL


def test_rails_are_classified_into_ps_pl_and_other():
    names = {"VCCINT": "PL", "VCCBRAM": "PL", "VCCAUX": "PL", "VCCPSINTFP": "PS", "VCCPSINTLP": "PS",
             "VCCPSAUX": "PS", "VCCPSDDR": "PS", "vcc_psintfp": "PS", "VCC_INT": "PL", "VCC3V3": "other",
             "MGTAVCC": "other", "INT": "other"}
    assert {name: rail_group(name) for name in names} == names
    rails = {name: rail(constant(1.0)) for name in ("VCCINT", "VCCPSAUX", "VCC3V3", "VCCPSDDR")}
    with PowerSampler(rails, interval_s=INTERVAL) as sampler:
        time.sleep(0.05)
    record = sampler.result
    assert record.groups == {"VCCINT": "PL", "VCCPSAUX": "PS", "VCC3V3": "other", "VCCPSDDR": "PS"}
    assert record.joules["PS"] == pytest.approx(record.joules_by_rail["VCCPSAUX"] + record.joules_by_rail["VCCPSDDR"])
    assert record.joules["PL"] == pytest.approx(record.joules_by_rail["VCCINT"])
    assert record.joules["other"] == pytest.approx(record.joules_by_rail["VCC3V3"])


def test_stop_is_idempotent():
    sampler = PowerSampler({"VCCINT": rail(constant(1.0))}, interval_s=INTERVAL)
    with pytest.raises(RuntimeError, match="not started"):
        sampler.stop()
    sampler.start()
    assert sampler.running
    time.sleep(0.03)
    first = sampler.stop()
    reads = sampler._sensors[0].reads
    assert sampler.stop() is first and sampler.result is first
    time.sleep(0.03)
    assert sampler._sensors[0].reads == reads  # nothing read after the first stop
    assert not sampler.running
    assert not any(thread.name == "codesign-power-sampler" and thread.is_alive() for thread in threading.enumerate())
    with pytest.raises(RuntimeError, match="already started"):
        sampler.start()


def test_a_failed_read_is_raised_by_stop_and_names_the_rail():
    failing = rail(constant(1.0), fail_at=3, fail=OSError("I2C read timed out"))
    sampler = PowerSampler({"VCCINT": rail(constant(1.0)), "VCCPSAUX": failing}, interval_s=INTERVAL)
    with pytest.raises(PowerReadError, match="rail 'VCCPSAUX' failed: OSError: I2C read timed out") as caught:
        with sampler:
            time.sleep(0.1)
    assert isinstance(caught.value.__cause__, OSError)
    assert sampler.result is None and not sampler.running
    with pytest.raises(PowerReadError):  # every stop says it, none returns a record
        sampler.stop()


def test_a_sensor_failing_at_once_fails_start():
    sampler = PowerSampler({"VCCINT": rail(constant(1.0), fail_at=1)}, interval_s=INTERVAL)
    with pytest.raises(PowerReadError, match="VCCINT"):
        sampler.start()


def test_the_body_error_goes_on_and_the_failed_read_is_warned():
    sampler = PowerSampler({"VCCINT": rail(constant(1.0), fail_at=2)}, interval_s=INTERVAL)
    with pytest.raises(ValueError, match="training failed"), pytest.warns(RuntimeWarning, match="VCCINT"):
        with sampler:
            time.sleep(0.05)
            raise ValueError("training failed")


def test_refused_arguments():
    with pytest.raises(ValueError, match="positive"):
        PowerSampler({"VCCINT": rail(constant(1.0))}, interval_s=0)
    with pytest.raises(ValueError, match="no rails"):
        PowerSampler({})
    with pytest.raises(ValueError, match="without a power sensor: VCCO"):
        PowerSampler({"VCCO": SimpleNamespace(power=None)})


@pytest.mark.skipif(board_attached(), reason="a PYNQ board is attached: it may have rails")
def test_no_rails_off_the_board_and_no_warning():
    import pynq.pmbus  # noqa: F401  (its import warnings are not this test's)

    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        assert measure_rails() == {}


# -- the OnBoard fit, on a fake loop


class FakeLoop:
    """A loop: ``fit`` trains ``max_steps`` steps (``step_seconds`` each) and returns its history."""

    step_seconds = 0.02

    def __init__(self, energy_pj_per_step: float | None = None) -> None:
        self.step, self.history, self.calls = 0, [], []
        self.energy_pj_per_step = energy_pj_per_step

    def fit(self, data, epochs=None, *, progress=True, max_steps=None, on_epoch=None):
        self.calls.append((data, epochs, progress, max_steps, on_epoch))
        for _ in range(max_steps):
            time.sleep(self.step_seconds)
            self.step += 1
        row = {"epoch": len(self.history)}
        if self.energy_pj_per_step is not None:
            row["energy_pj"] = self.energy_pj_per_step * self.step  # cumulative, as the TT loop's ledger
        self.history.append(row)
        return self.history

    def throughput(self):
        return {"macs": 0}


class FakeBoardTrainer(OnBoard, FakeLoop):
    def __init__(self, overlay, **kwargs) -> None:
        self.overlay = overlay
        super().__init__(**kwargs)

    def throughput(self):
        return {**super().throughput(), **self.ip_figures([], 0, StageLog())}


def fake_overlay(emulated: bool, board: str = "ultra96v2") -> SimpleNamespace:
    return SimpleNamespace(emulated=emulated, manifest={"board": board, "clock_mhz": 100.0})


def test_fit_on_a_board_records_joules_per_step(monkeypatch):
    rails = {"VCCINT": rail(constant(1.5)), "VCCPSINTFP": rail(constant(0.8)), "VCC3V3": rail(constant(0.1))}
    monkeypatch.setattr(board_module, "measure_rails", lambda: rails)
    trainer = FakeBoardTrainer(fake_overlay(emulated=False))
    trainer.power_interval_s = INTERVAL
    assert trainer.throughput()["energy"] is None  # before a fit
    history = trainer.fit("data", 1, progress=False, max_steps=5, on_epoch=None)
    assert history == trainer.history and trainer.calls == [("data", 1, False, 5, None)]  # the loop's own fit
    energy = trainer.energy
    assert energy["source"] == "pmbus" and energy["board"] == "ultra96v2" and energy["steps"] == 5
    assert energy["seconds"] >= 5 * FakeLoop.step_seconds
    assert energy["joules"] == pytest.approx({"PS": 0.8 * energy["seconds"], "PL": 1.5 * energy["seconds"],
                                              "other": 0.1 * energy["seconds"]})
    assert energy["joules_per_step"] == pytest.approx({group: joules / 5 for group, joules in energy["joules"].items()})
    assert energy["rail_groups"] == {"VCCINT": "PL", "VCCPSINTFP": "PS", "VCC3V3": "other"}
    assert trainer.throughput()["energy"] == energy
    trainer.fit("data", 1, progress=False, max_steps=2)  # the next call's figures are its own
    assert trainer.energy["steps"] == 2


def test_fit_on_a_board_without_rails_says_unavailable(monkeypatch):
    monkeypatch.setattr(board_module, "measure_rails", lambda: {})
    trainer = FakeBoardTrainer(fake_overlay(emulated=False, board="zedboard"))
    trainer.fit("data", progress=False, max_steps=1)
    assert trainer.energy["source"] == "unavailable" and trainer.energy["joules_per_step"] is None
    assert "zedboard" in trainer.energy["reason"]


def test_fit_on_the_emulated_board_is_labelled_modelled(monkeypatch):
    def no_reading():
        raise AssertionError("the emulated board has no rails to read")

    monkeypatch.setattr(board_module, "measure_rails", no_reading)
    trainer = FakeBoardTrainer(fake_overlay(emulated=True))
    trainer.fit("data", progress=False, max_steps=1)
    assert trainer.energy == {"source": "modelled", "steps": 1, "joules_per_step": None,
                              "reason": board_module.NO_MODELLED_ENERGY}
    ledger = FakeBoardTrainer(fake_overlay(emulated=True), energy_pj_per_step=2e6)  # a loop with a modelled figure
    ledger.fit("data", progress=False, max_steps=3)
    assert ledger.energy["source"] == "modelled" and ledger.energy["joules_per_step"] == pytest.approx(2e-6)
    ledger.fit("data", progress=False, max_steps=2)
    assert ledger.energy["joules"] == pytest.approx(4e-6) and ledger.energy["steps"] == 2


# -- the shipped FB design point


def _fb_trainer(overlay):
    from codesign.deploy.training import BoardTrainer

    return BoardTrainer(overlay, epochs=1, ip="fpmac_array_0")  # the per-call route: one of its two IPs


def _digits():
    from codesign.train.data import load_digits_dataset

    return load_digits_dataset(validation_fraction=0.2)


@pytest.mark.slow  # about 5 s: the IP's C++ bridge and one step
def test_emulated_board_energy_is_modelled(tmp_path):
    from codesign.design import load_design

    overlay = emulated_overlay(load_design(EXAMPLE), tmp_path)
    trainer = _fb_trainer(overlay)
    trainer.fit(_digits(), progress=False, max_steps=1)
    assert trainer.step == 1
    energy = trainer.throughput()["energy"]
    assert energy["source"] == "modelled" and energy["joules_per_step"] is None and energy["reason"]


@pytest.mark.board
@pytest.mark.skipif(not os.environ.get("CODESIGN_BUILD_DIR"),
                    reason="CODESIGN_BUILD_DIR unset: name the build folder of digits_abvs built for this board")
@pytest.mark.skipif(not board_attached(), reason="no PYNQ board attached (pynq finds no device)")
def test_joules_per_step_on_the_ultra96v2():
    """A few FB steps on the Ultra96-V2 with its PS and PL rails read: both spent energy."""
    from codesign.deploy import CodesignOverlay

    overlay = CodesignOverlay(os.environ["CODESIGN_BUILD_DIR"], emulate=False)
    if overlay.manifest["board"] != "ultra96v2":
        pytest.skip(f"the build folder is for {overlay.manifest['board']}: the PMBus rails read here are the "
                    "Ultra96-V2's")
    trainer = _fb_trainer(overlay)
    trainer.fit(_digits(), progress=False, max_steps=3)
    energy = trainer.energy
    assert energy["source"] == "pmbus", energy
    assert energy["steps"] == 3 and energy["samples"] >= 2
    assert energy["joules_per_step"]["PS"] > 0 and energy["joules_per_step"]["PL"] > 0
    print(f"\n{energy['steps']} steps in {energy['seconds']:.2f} s: "
          f"PS {energy['joules_per_step']['PS']:.3f} J/step, PL {energy['joules_per_step']['PL']:.3f} J/step "
          f"({', '.join(f'{name} {group}' for name, group in energy['rail_groups'].items())})")
