"""An analytical resource model of a PE, calibrated against Yosys: DSP and BRAM counted, LUT and FF fitted.

Synthesis takes seconds to minutes per configuration, too slow to price
every point of a design space. A PE that describes what its RTL is built of
(its RAMs as ``(depth, width)``, its multipliers as ``(a_bits, b_bits)``,
and a few features LUT and FF grow with) gets a model here:

- **DSP**: one DSP slice per multiplier whose operands fit the slice's
  signed multiplier (25 x 18 on 7-series DSP48E1, Xilinx UG479; 27 x 18 on
  UltraScale+ DSP48E2, UG579), more for wider ones;
- **BRAM** (36 Kib units, Yosys's count with RAMB18 as 0.5): per RAM the
  cheapest tiling by the block RAM's aspect ratios (UG473 for 7-series,
  UG573 for UltraScale+: 32K x 1 to 512 x 72, and the 18 Kib halves), and no
  block RAM for a shallow or small RAM (:data:`DISTRIBUTED_MAX_DEPTH` words,
  :data:`DISTRIBUTED_MAX_BITS`), which Yosys maps to LUT RAM;
- **LUT, FF**: linear in the PE's features, least squares over a
  calibration grid of Yosys runs (FINN's LUT model is likewise a fit).

A :class:`Calibration` holds the grid's Yosys counts, the fitted
coefficients, the Yosys version and a hash of the RTL it was measured on,
so a model is never used on RTL it was not calibrated for without saying so.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from codesign.io.jsonfile import load_json
from codesign.io.reports import write_json_atomic

RESOURCES = ("lut", "ff", "dsp", "bram_36k")
FITTED = ("lut", "ff")
# Yosys maps a RAM to LUT RAM when it is at most 128 words deep and holds under 16 Kib, or holds under 8 Kib,
# unless it is a narrow RAM (at most 36 bits, one block RAM port) over 64 words deep holding 3 Kib or more on
# 7-series, 4 Kib or more on UltraScale+ (whose LUT RAM primitives are wider). Seen in the calibration grids and
# the shipped reports: 256 x 8, 128 x 18 and 64 x 18 went to LUT RAM on both; 128 x 24 to block RAM on xc7 and
# LUT RAM on xcup; 256 x 64, 512 x 32, 256 x 18, 128 x 32, 128 x 128 and 128 x 256 (PE1's and PE2's two A banks)
# to block RAM on both. Near 16 Kib the choice depends on the logic around the RAM: an earlier PE RTL's one-bank
# 128 x 128 A RAM went to LUT RAM.
DISTRIBUTED_MAX_DEPTH = 128
DISTRIBUTED_MAX_SHALLOW_BITS = 16384
DISTRIBUTED_MAX_BITS = 8192
NARROW_BLOCK = (36, 64)  # width at most, depth above: such a RAM goes to block RAM from NARROW_BLOCK_BITS up
NARROW_BLOCK_BITS = {"xc7": 3072, "xcup": 4096}
# (depth, width, BRAM36 units) of the block RAM's configurations: RAMB36 then RAMB18 (UG473 Table 1-7, UG573)
BRAM_SHAPES = ((32768, 1, 1.0), (16384, 2, 1.0), (8192, 4, 1.0), (4096, 9, 1.0), (2048, 18, 1.0), (1024, 36, 1.0),
               (512, 72, 1.0), (16384, 1, 0.5), (8192, 2, 0.5), (4096, 4, 0.5), (2048, 9, 0.5), (1024, 18, 0.5),
               (512, 36, 0.5))
DSP_OPERANDS = {"xc7": (25, 18), "xcup": (27, 18)}  # signed multiplier of one DSP slice, per Yosys family
SCHEMA = "codesign-resource-calibration"


def fpga_counts(counts: Mapping[str, float]) -> dict[str, float]:
    """LUT sites (logic + LUT RAM + SRL), FF, DSP and 36 Kib BRAMs from a Yosys count dictionary."""
    return {"lut": float(counts["lut"] + counts.get("lutram", 0) + counts.get("srl", 0)), "ff": float(counts["ff"]),
            "dsp": float(counts["dsp"]), "bram_36k": float(counts["bram_36k"])}


def bram36(depth: int, width: int, family: str = "xc7") -> float:
    """Block RAM (36 Kib units) of one ``depth`` x ``width`` RAM on ``family``: its cheapest tiling, or 0 for LUT
    RAM."""
    narrow_width, narrow_depth = NARROW_BLOCK
    narrow = width <= narrow_width and depth > narrow_depth and depth * width >= NARROW_BLOCK_BITS[family]
    shallow = depth <= DISTRIBUTED_MAX_DEPTH and depth * width < DISTRIBUTED_MAX_SHALLOW_BITS
    if not narrow and (shallow or depth * width < DISTRIBUTED_MAX_BITS):
        return 0.0
    return min(math.ceil(depth / d) * math.ceil(width / w) * size for d, w, size in BRAM_SHAPES)


def distributed_bits(memories: Sequence[tuple[int, int]]) -> float:
    """Bits of LUT RAM the ``(depth, width)`` RAMs that :func:`bram36` leaves to LUT RAM on 7-series take, their depth
    rounded up to the 64-word LUT RAM primitives (a LUT/FF feature, the same on either family: LUT RAM counts as
    LUT sites)."""
    return float(sum(math.ceil(depth / 64) * 64 * width for depth, width in memories if bram36(depth, width) == 0))


def dsp_slices(a_bits: int, b_bits: int, family: str) -> int:
    """DSP slices of one signed ``a_bits`` x ``b_bits`` multiplier: 1 when it fits the slice either way round."""
    long_side, short_side = DSP_OPERANDS[family]
    a, b = max(a_bits, b_bits), min(a_bits, b_bits)
    if a <= long_side and b <= short_side:
        return 1
    return math.ceil(a / (long_side - 1)) * math.ceil(b / (short_side - 1))


def rtl_hash(sources: Iterable[Path]) -> str:
    """SHA-256 (first 16 hex digits) of the RTL files' names and bytes: what a calibration was measured on."""
    digest = hashlib.sha256()
    for path in sorted(Path(p) for p in sources):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


@dataclass(frozen=True, kw_only=True)
class Calibration:
    """Yosys counts of a PE on one family over a grid of specs, and the LUT/FF coefficients fitted to them."""

    pe: str
    family: str
    yosys_version: str
    rtl_hash: str
    points: tuple[dict[str, Any], ...]  # {"spec": spec dict, "counts": {lut, ff, dsp, bram_36k}}
    coefficients: dict[str, dict[str, float]] = field(default_factory=dict)  # resource -> feature -> coefficient

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "pe": self.pe, "family": self.family, "yosys_version": self.yosys_version,
                "rtl_hash": self.rtl_hash, "points": list(self.points), "coefficients": self.coefficients}

    @classmethod
    def read(cls, path: Path) -> Calibration:
        raw = load_json(path, what="resource calibration", required={"schema": str, "pe": str, "family": str,
                                                                      "yosys_version": str, "rtl_hash": str,
                                                                      "points": list, "coefficients": dict})
        if raw["schema"] != SCHEMA:
            raise ValueError(f"{path}: schema {raw['schema']!r} is not {SCHEMA!r}")
        return cls(pe=raw["pe"], family=raw["family"], yosys_version=raw["yosys_version"], rtl_hash=raw["rtl_hash"],
                   points=tuple(raw["points"]), coefficients=raw["coefficients"])

    def write(self, path: Path) -> Path:
        return write_json_atomic(path, self.to_dict())


def fit(points: Sequence[Mapping[str, Any]], features_of: Callable[[Mapping], Mapping[str, float]]
        ) -> dict[str, dict[str, float]]:
    """LUT and FF coefficients per feature: least squares over the points' Yosys counts."""
    rows = [features_of(point["spec"]) for point in points]
    names = list(rows[0])
    matrix = np.array([[row[name] for name in names] for row in rows], dtype=np.float64)
    out = {}
    for resource in FITTED:
        target = np.array([point["counts"][resource] for point in points], dtype=np.float64)
        solution, *_ = np.linalg.lstsq(matrix, target, rcond=None)
        out[resource] = {name: float(value) for name, value in zip(names, solution)}
    return out


def model_counts(memories: Sequence[tuple[int, int]], multipliers: Sequence[tuple[int, int]],
                 features: Mapping[str, float], coefficients: Mapping[str, Mapping[str, float]], family: str
                 ) -> dict[str, float]:
    """LUT, FF (fitted), DSP and BRAM (counted) of one configuration."""
    counts = {resource: max(0.0, sum(coefficients[resource][name] * value for name, value in features.items()))
              for resource in FITTED}
    counts["dsp"] = float(sum(dsp_slices(a, b, family) for a, b in multipliers))
    counts["bram_36k"] = float(sum(bram36(depth, width, family) for depth, width in memories))
    return counts


def relative_errors(calibration: Calibration, estimate: Callable[[Mapping], Mapping[str, float]]
                    ) -> dict[str, dict[str, float]]:
    """Per resource: the largest and the mean |model - Yosys| / Yosys over the calibration points (0 where both
    are 0), and the largest absolute difference."""
    out = {}
    for resource in RESOURCES:
        rel, diff = [], []
        for point in calibration.points:
            measured, modelled = float(point["counts"][resource]), float(estimate(point["spec"])[resource])
            diff.append(abs(modelled - measured))
            rel.append(0.0 if measured == modelled else abs(modelled - measured) / max(abs(measured), 1e-9))
        out[resource] = {"max_rel": max(rel), "mean_rel": float(np.mean(rel)), "max_abs": max(diff)}
    return out



def held_out_errors(calibration: Calibration, features_of: Callable[[Mapping], Mapping[str, float]]
                    ) -> dict[str, dict[str, float]]:
    """LUT and FF errors of each point predicted by a fit of the other points (leave one out): the error a new
    configuration can expect, which the in-sample errors of :func:`relative_errors` understate."""
    points = list(calibration.points)
    out = {}
    for resource in FITTED:
        rel = []
        for index, point in enumerate(points):
            rest = points[:index] + points[index + 1:]
            coefficients = fit(rest, features_of)[resource]
            predicted = sum(coefficients[name] * value for name, value in features_of(point["spec"]).items())
            rel.append(abs(predicted - point["counts"][resource]) / max(abs(point["counts"][resource]), 1e-9))
        out[resource] = {"max_rel": max(rel), "mean_rel": float(np.mean(rel))}
    return out


__all__ = ["BRAM_SHAPES", "Calibration", "RESOURCES", "bram36", "distributed_bits", "dsp_slices", "fit", "fpga_counts", "held_out_errors",
           "model_counts",
           "relative_errors", "rtl_hash"]
