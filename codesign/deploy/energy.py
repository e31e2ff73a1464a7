"""Energy measured on the board: the PMBus power rails of the PS and the PL, sampled while a loop trains.

:func:`measure_rails` asks PYNQ (``pynq.pmbus.get_rails``, libsensors) for
the board's power rails and keeps those with a power sensor; off a board
(no libsensors) it finds none and returns ``{}``.

:class:`PowerSampler` reads the power of every given rail every
``interval_s`` seconds on a background thread, and integrates it over
time (trapezoid rule on ``time.monotonic``) into joules per rail and per
group (:data:`RAIL_GROUPS`: ``PS``, ``PL``, ``other``). PYNQ's own
``DataRecorder`` needs pandas, which board images do not ship, so it is not
used. The first reading is taken by :meth:`PowerSampler.start` and the
last by :meth:`PowerSampler.stop`, so the integral spans exactly the
sampled interval however short it is. A failed sensor read stops the
sampling and is raised by :meth:`PowerSampler.stop` (:class:`PowerReadError`).

The rails' power is the whole supply's: static power, the host's work on
the PS and anything else the board runs at the time are in it.
"""

from __future__ import annotations

import threading
import time
import warnings
from typing import Any, Callable, Mapping

from codesign.deploy.manifest import DeployError
from codesign.numerics.records import keyword_record

GROUPS = ("PS", "PL", "other")

# Rail name (upper case, without "_", "-" and spaces) -> the part of the device it supplies. The names are the
# Zynq UltraScale+ MPSoC supply names (DS925, UG1085) as board power monitors label them (the Ultra96-V2's PMBus
# regulators report e.g. VCCINT, VCCBRAM, VCCAUX, VCCPSINTFP, VCCPSINTLP, VCCPSAUX, VCCPSDDR). A rail not listed
# here (board supplies, I/O banks, transceivers) counts as "other".
RAIL_GROUPS = {
    # programmable logic
    "VCCINT": "PL",  # PL core
    "VCCINTIO": "PL",
    "VCCBRAM": "PL",
    "VCCAUX": "PL",
    "VCCAUXIO": "PL",
    # processing system
    "VCCPSINTFP": "PS",  # full-power domain (APU, DDR controller)
    "VCCPSINTLP": "PS",  # low-power domain (RPU, peripherals)
    "VCCPSAUX": "PS",
    "VCCPSPLL": "PS",
    "VCCPSDDR": "PS",
    "VCCPSDDRPLL": "PS",
    "VCCPSINTFPDDR": "PS",
    "VCCOPSDDR": "PS",
    "VCCOPSIO": "PS",
}


class PowerReadError(DeployError):
    """A power sensor could not be read while sampling."""


def rail_group(name: str) -> str:
    """``"PS"``, ``"PL"`` or ``"other"`` for a rail name, by :data:`RAIL_GROUPS` (case, ``_``, ``-`` and spaces
    ignored)."""
    key = "".join(char for char in str(name).upper() if char not in "_- ")
    return RAIL_GROUPS.get(key, "other")


def measure_rails(config_file: str | None = None) -> dict[str, Any]:
    """The board's power rails that have a power sensor (``pynq.pmbus.get_rails``), by name; ``{}`` where there
    are none (off a board PYNQ warns that libsensors is missing: that warning is caught)."""
    try:
        from pynq.pmbus import get_rails
    except (ImportError, OSError):  # an image without cffi or libsensors bindings
        return {}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Could not initialise libsensors", category=UserWarning)
        rails = get_rails(config_file)
    return {name: rails[name] for name in sorted(rails) if getattr(rails[name], "power", None) is not None}


@keyword_record
class PowerRecord:
    """What a :class:`PowerSampler` measured: ``seconds`` from the first reading to the last, the ``samples``
    taken, joules per group (``PS``, ``PL``, ``other``) and per rail, and each rail's group."""

    seconds: float
    samples: int
    interval_s: float
    joules: Mapping[str, float]
    joules_by_rail: Mapping[str, float]
    groups: Mapping[str, str]
    source: str = "pmbus"

    def watts(self) -> dict[str, float]:
        """Mean power per group over the record (0 for a record of no duration)."""
        return {group: joules / self.seconds if self.seconds > 0 else 0.0 for group, joules in self.joules.items()}


class PowerSampler:
    """Integrates the power of ``rails`` (name -> an object whose ``.power.value`` is in watts, as
    ``pynq.pmbus.Rail``) over time, on a background thread reading every ``interval_s`` seconds.

    ``with PowerSampler(rails) as sampler: ...`` then ``sampler.result`` (a
    :class:`PowerRecord`); or :meth:`start` and :meth:`stop`, which returns
    the record (a second :meth:`stop` returns the same one). ``clock`` is
    the time source in seconds (``time.monotonic``).
    """

    def __init__(self, rails: Mapping[str, Any], interval_s: float = 0.05, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s must be positive, got {interval_s!r}")
        if not rails:
            raise ValueError("no rails to sample")
        missing = [name for name, rail in rails.items() if getattr(rail, "power", None) is None]
        if missing:
            raise ValueError(f"rails without a power sensor: {', '.join(map(str, missing))}")
        self.names = [str(name) for name in rails]
        self.groups = {name: rail_group(name) for name in self.names}
        self.interval_s = float(interval_s)
        self._sensors = [rail.power for rail in rails.values()]
        self._clock = clock
        self._thread: threading.Thread | None = None
        self._halt = threading.Event()
        self._error: BaseException | None = None
        self.result: PowerRecord | None = None

    # -- readings

    def _read(self) -> tuple[float, list[float]]:
        before = self._clock()
        watts = []
        for name, sensor in zip(self.names, self._sensors):
            try:
                watts.append(float(sensor.value))
            except Exception as error:
                raise PowerReadError(f"reading the power of rail {name!r} failed: {type(error).__name__}: "
                                     f"{error}") from error
        return (before + self._clock()) / 2, watts

    def _take(self) -> None:
        now, watts = self._read()
        then, previous = self._last
        step = now - then
        for index, (a, b) in enumerate(zip(previous, watts)):
            self._joules[index] += 0.5 * (a + b) * step
        self._last = (now, watts)
        self._samples += 1

    def _run(self) -> None:
        try:
            while not self._halt.wait(self.interval_s):
                self._take()
        except BaseException as error:  # kept for stop() to raise
            self._error = error

    # -- start, stop

    @property
    def running(self) -> bool:
        return self._thread is not None and self.result is None and self._error is None

    def start(self) -> PowerSampler:
        """Take the first reading (a sensor that cannot be read fails here) and start the thread."""
        if self._thread is not None:
            raise RuntimeError("this PowerSampler was already started (one record per sampler)")
        self._last = self._read()
        self._first = self._last[0]
        self._joules = [0.0] * len(self.names)
        self._samples = 1
        self._thread = threading.Thread(target=self._run, name="codesign-power-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> PowerRecord:
        """Stop the thread, take the last reading and return the record; raises the error of a failed reading
        (:class:`PowerReadError`), on every call. Stopping again returns the same record."""
        if self._thread is None:
            raise RuntimeError("the PowerSampler was not started")
        if self.result is None and self._error is None:
            self._halt.set()
            self._thread.join()
            if self._error is None:
                try:
                    self._take()
                except BaseException as error:
                    self._error = error
            if self._error is None:
                joules_by_rail = dict(zip(self.names, self._joules))
                joules = {group: 0.0 for group in GROUPS}
                for name, value in joules_by_rail.items():
                    joules[self.groups[name]] += value
                self.result = PowerRecord(seconds=self._last[0] - self._first, samples=self._samples,
                                          interval_s=self.interval_s, joules=joules, joules_by_rail=joules_by_rail,
                                          groups=dict(self.groups))
        if self._error is not None:
            raise self._error
        return self.result

    def __enter__(self) -> PowerSampler:
        return self.start()

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None:
            self.stop()
            return
        try:  # the body's error goes on; a failed reading is still said
            self.stop()
        except Exception as error:
            warnings.warn(f"power sampling failed too: {error}", RuntimeWarning, stacklevel=2)

    def __del__(self) -> None:
        halt = getattr(self, "_halt", None)
        if halt is not None:
            halt.set()


__all__ = ["GROUPS", "RAIL_GROUPS", "PowerReadError", "PowerRecord", "PowerSampler", "measure_rails", "rail_group"]
