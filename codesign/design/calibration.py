"""Calibrate each PE's analytical resource model against Yosys, and price a PE configuration with it.

The calibrations ship with the package (``codesign/design/calibration/<pe>-<family>.json``):
each holds the Yosys counts of the PE's calibration grid
(:meth:`~codesign.hw.protocol.ProcessingElement.calibration_specs`), the
LUT/FF coefficients fitted to them, the Yosys version and the hash of the
RTL measured (its sources and the shared files they include).
:func:`pe_resources` refuses a calibration whose RTL hash is not the
current RTL's (re-run ``codesign calibrate``), so a model never prices RTL
it was not fitted on.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from codesign.design.fit import pe_cost
from codesign.hw.estimate_cache import hashed_sources
from codesign.hw.resource_model import Calibration, fit, held_out_errors, model_counts, relative_errors, rtl_hash
from codesign.hw.yosys import yosys_version
from codesign.io.cache import cache_dir
from codesign.pe import get_pe
from codesign.resources import source_tree

CALIBRATION_DIR = Path(__file__).resolve().parent / "calibration"


class StaleCalibration(ValueError):
    """A PE's calibration was measured on other RTL (or is missing); the message says how to renew it."""


def calibration_path(pe_name: str, family: str) -> Path:
    """The shipped calibration file (in the package)."""
    return CALIBRATION_DIR / f"{pe_name}-{family}.json"


def user_calibration_dir() -> Path:
    """Where ``codesign calibrate`` writes outside a source checkout: the user's cache (an installed package's
    files are never written at run time)."""
    return cache_dir() / "calibration"


def calibration_out_dir() -> Path:
    """Where a new calibration goes: the package's shipped folder in a source checkout (to be committed), else the
    user's cache."""
    return CALIBRATION_DIR if source_tree() is not None else user_calibration_dir()


def calibrate(pe_name: str, family: str, *, cache_dir: Path, out_dir: Path | None = None,
              progress: Callable[[str], None] | None = None) -> Calibration:
    """Synthesise the PE's calibration grid on ``family`` (cached by RTL content), fit LUT and FF, write the file
    into ``out_dir`` (default :func:`calibration_out_dir`)."""
    pe = get_pe(pe_name)
    specs = pe.calibration_specs()
    if not specs:
        raise ValueError(f"PE {pe_name} has no calibration grid (no analytical resource model)")
    points = []
    for index, spec in enumerate(specs, start=1):
        if progress is not None:
            progress(f"[{pe_name} {family} {index}/{len(specs)}] Yosys on {pe.describe_spec(spec)}")
        points.append({"spec": spec.to_dict(), "counts": pe_cost(pe_name, spec, family, cache_dir)})
    calibration = Calibration(pe=pe_name, family=family, yosys_version=yosys_version(),
                              rtl_hash=rtl_hash(hashed_sources(pe)), points=tuple(points),
                              coefficients=fit(points, lambda spec: pe.resource_parts(pe.spec(**spec))[2]))
    calibration.write(Path(out_dir or calibration_out_dir()) / f"{pe_name}-{family}.json")
    return calibration


def load_calibration(pe_name: str, family: str) -> Calibration:
    """The shipped calibration of ``pe_name`` on ``family``, refused when the RTL changed since it was measured."""
    current = rtl_hash(hashed_sources(get_pe(pe_name)))
    stale = []
    for path in (user_calibration_dir() / f"{pe_name}-{family}.json", calibration_path(pe_name, family)):
        if path.is_file():  # the user's own (calibrate outside a checkout) first, then the shipped one
            calibration = Calibration.read(path)
            if calibration.rtl_hash == current:
                return calibration
            stale.append(f"{path} was measured on RTL {calibration.rtl_hash}")
    if not stale:
        raise StaleCalibration(f"PE {pe_name} has no resource calibration for {family} "
                               f"({calibration_path(pe_name, family)}); run `codesign calibrate {pe_name} --family "
                               f"{family}`")
    raise StaleCalibration(f"{'; '.join(stale)}, the RTL is now {current}; run `codesign calibrate {pe_name} "
                           f"--family {family}`")


def pe_resources(pe_name: str, spec, family: str, calibration: Calibration | None = None) -> dict[str, float]:
    """LUT, FF (fitted), DSP and BRAM36 (counted) of one PE configuration on ``family``, without Yosys."""
    pe = get_pe(pe_name)
    calibration = calibration or load_calibration(pe_name, family)
    memories, multipliers, features = pe.resource_parts(spec)
    return model_counts(memories, multipliers, features, calibration.coefficients, family)


def model_errors(pe_name: str, family: str) -> dict[str, Any]:
    """The model against the calibration's Yosys counts: per resource the largest and mean relative error in
    sample, and for LUT and FF also held out (each point predicted by a fit of the others)."""
    calibration = load_calibration(pe_name, family)
    pe = get_pe(pe_name)
    errors = relative_errors(calibration, lambda spec: pe_resources(pe_name, pe.spec(**spec), family, calibration))
    held_out = held_out_errors(calibration, lambda spec: pe.resource_parts(pe.spec(**spec))[2])
    for resource, values in held_out.items():
        errors[resource].update({f"held_out_{key}": value for key, value in values.items()})
    return errors


__all__ = ["CALIBRATION_DIR", "StaleCalibration", "calibrate", "calibration_path", "load_calibration", "model_errors",
           "pe_resources"]
