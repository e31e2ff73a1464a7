"""Energy per FB-float MAC (pJ) as a function of FB: synthesised area and depth, voltage scaling, one FP32 anchor.

Why: ABVS saves energy twice when it trains with fewer fraction bits (FB) —
the narrower FP-MAC switches less capacitance, and its shorter critical path
leaves timing slack that a lower supply voltage can absorb (paper 004, Sec.
IV-C, Eq. (2), Fig. 9b). This module turns the FP-MAC's Yosys report into a
per-MAC energy for every FB so that the training ledger can price ``fp`` MACs.

The model, per FB (units in brackets):

* area ``A(FB)`` [LUT-equivalents]: ``"lut"`` — logic LUT cells of the mapped
  netlist (default); or ``"weighted"`` — ``LUT + FF/2 + 20*DSP``, a footprint
  proxy: a 7-series CLB holds 8 LUT6 and 16 flip-flops (Xilinx UG474), so a
  flip-flop slot is half a LUT slot, and a DSP48E1 tile of two slices is as
  tall as five CLBs (Xilinx UG479), so one DSP slice is ~2.5 CLBs = 20 LUT
  slots. Carry cells live inside slices and add nothing.
* critical-path delay ``D(FB)`` [ns at the nominal supply]: the cells on the
  longest combinational path, as the report counts them, each weighted by the
  delay of its cell type (:class:`DelayModel`: a LUT level with its local
  route, one CARRY4 of a carry chain, a wide mux, a combinational DSP). The
  report's path is the one with the most *cells*; re-weighting it gives that
  path's delay, not necessarily the slowest path under the weights (a path of
  fewer cells through a DSP may be slower), so ``D`` is a lower bound on the
  weighted critical path. :data:`UNIFORM_DELAYS` (every cell 1, i.e.
  ``D`` = the cell count) is the earlier model, kept for comparison;
  :data:`PER_CELL_DELAYS` holds the per-family values with their sources.
* supply ``V(FB)`` [V]: the lowest voltage in ``[min_supply_v, max_supply_v]``
  at which the FB circuit meets the clock of the *timing* circuit
  (``timing_fb``, the widest FB the training uses) running at the nominal
  ``supply_v``. Gate delay follows the alpha-power law (Sakurai & Newton,
  IEEE JSSC 25(2), 1990): ``t ∝ V / (V - V_t)^a``, every cell type scaling
  alike, so the condition is ``D(FB) * t(V) <= D(timing_fb) * t(V0)`` and
  ``V(timing_fb) = V0``. A narrower FB is not always faster: on xc7 the
  longest path of FB = 4 (17 LUT levels, 6 carry cells, the DSP) is longer
  than FB = 5's (16, 5, the DSP), so FB = 4 under an FB = 5 clock needs a
  supply above ``V0`` (up to ``max_supply_v``; beyond that the model refuses
  the FB).
  Parameters (assumptions, see :class:`VoltageModel`): ``V0 = 1.0 V``
  (the paper's minimum acceptable voltages span 0.85–1.02 V, Fig. 9b),
  ``V_t = 0.35 V`` (45 nm-class bulk CMOS, within 0.3–0.4 V),
  ``a = 1.3`` (Sakurai & Newton's short-channel value; the law holds for
  1 <= a <= 2), floor 0.6 V (the alpha-power law loses accuracy near V_t),
  ceiling 1.2 V.
* energy ``E(FB) = E_FP32 * A(FB)/A(23) * (V(FB)/V0)^2`` [pJ]: dynamic
  energy is switched capacitance (∝ area) times V², and an FB = 23 MAC at
  the nominal supply costs Horowitz's FP32 multiply + add
  (:mod:`codesign.energy.table`, 3.7 + 0.9 = 4.6 pJ), so FP32 baseline runs
  (priced as ``fp32`` MACs) and FB-float runs share one scale. Leakage is
  not modelled.

FBs between swept points are interpolated linearly (area and delay); below
the smallest swept FB the smallest point is used (no savings are claimed
beyond the data); FB = 23 must be present (it is the anchor).

When no report is given or the file is absent, :data:`FALLBACK_XC7` is used:
the same sweep, measured once with Yosys 0.23 on ``rtl/fpmac`` for xc7 and
embedded here; :attr:`FpMacEnergyModel.source` says which one priced a run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codesign.energy.table import EnergyTable, horowitz_45nm

ANCHOR_FB = 23
MAX_FB = 23
AREA_METRICS = ("lut", "weighted")
# Footprint weights of the "weighted" area (LUT-equivalents per cell), see the module docstring.
FF_LUT_EQUIVALENT = 0.5
DSP_LUT_EQUIVALENT = 20.0


@dataclass(frozen=True, kw_only=True)
class VoltageModel:
    """Alpha-power-law supply scaling; voltages in V, ``alpha_power`` dimensionless.

    ``supply_v``: nominal supply at which the timing circuit just meets the
    clock; ``threshold_v``: transistor threshold; ``min_supply_v`` and
    ``max_supply_v``: the range the solver may return.
    """

    supply_v: float = 1.0
    threshold_v: float = 0.35
    alpha_power: float = 1.3
    min_supply_v: float = 0.6
    max_supply_v: float = 1.2

    def __post_init__(self) -> None:
        values = (self.supply_v, self.threshold_v, self.alpha_power, self.min_supply_v, self.max_supply_v)
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values):
            raise ValueError(f"voltage model parameters must be finite numbers, got {values}")
        if not 1.0 <= self.alpha_power <= 2.0:
            raise ValueError(f"alpha_power={self.alpha_power} is outside the alpha-power law's range [1, 2]")
        if not 0 < self.threshold_v < self.min_supply_v <= self.supply_v <= self.max_supply_v:
            raise ValueError("need 0 < threshold_v < min_supply_v <= supply_v <= max_supply_v, got "
                             f"{self.threshold_v}, {self.min_supply_v}, {self.supply_v}, {self.max_supply_v}")

    def gate_delay(self, volts: float) -> float:
        """Relative gate delay ``V / (V - V_t)^a`` (arbitrary units; decreasing in V for a >= 1)."""
        return volts / (volts - self.threshold_v) ** self.alpha_power

    def min_supply(self, depth: float, reference_depth: float) -> float:
        """Lowest supply (V) at which a path of ``depth`` cells is as fast as ``reference_depth`` cells at ``supply_v``.

        Clamped to ``min_supply_v`` when even that meets timing; ``ValueError``
        when ``max_supply_v`` does not. Bisection to 1e-12 V, returning the
        upper end, so the result always meets timing.
        """
        if not (depth > 0 and reference_depth > 0):
            raise ValueError(f"depths must be positive, got {depth} and {reference_depth}")
        if depth == reference_depth:
            return self.supply_v  # exactly: the timing circuit itself runs at the nominal supply
        budget = reference_depth * self.gate_delay(self.supply_v)
        if depth * self.gate_delay(self.min_supply_v) <= budget:
            return self.min_supply_v
        if depth * self.gate_delay(self.max_supply_v) > budget:
            raise ValueError(f"a path of {depth:g} cells cannot match {reference_depth:g} cells at "
                             f"{self.supply_v} V below max_supply_v={self.max_supply_v} V")
        low, high = self.min_supply_v, self.max_supply_v  # low fails timing, high meets it
        while high - low > 1e-12:
            middle = 0.5 * (low + high)
            if depth * self.gate_delay(middle) <= budget:
                high = middle
            else:
                low = middle
        return high


PATH_CATEGORIES = ("lut", "carry", "muxf", "dsp", "other")  # as codesign.hw.yosys.LogicDepth.by_category


@dataclass(frozen=True, kw_only=True)
class DelayModel:
    """Delay (ns, nominal supply, slowest speed grade) of one cell of each type on a critical path.

    ``lut``: one LUT level with its local route; ``carry``: one CARRY4/CARRY8
    cell of a chain (the chain's dedicated wire, no general routing);
    ``muxf``: one MUXF7/F8; ``dsp``: a DSP slice passed combinationally;
    ``other``: anything else. ``sources`` says where each value comes from
    (a data-sheet table, or "assumption: ..." when no figure was found).
    """

    name: str
    lut: float
    carry: float
    muxf: float
    dsp: float
    other: float
    sources: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        for category in PATH_CATEGORIES:
            value = getattr(self, category)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value)
                                                                                     and value > 0):
                raise ValueError(f"delay of {category!r} must be a finite number of ns > 0, got {value!r}")

    def delay(self, category: str) -> float:
        if category not in PATH_CATEGORIES:
            raise ValueError(f"unknown cell category {category!r}; expected one of {PATH_CATEGORIES}")
        return float(getattr(self, category))

    def path_delay(self, path: Mapping[str, int]) -> float:
        """Sum over the path's cells of their delays (ns)."""
        return sum(count * self.delay(category) for category, count in path.items())

    def scaled(self, category: str, factor: float) -> DelayModel:
        """The same model with one cell type's delay times ``factor`` (a sensitivity variant)."""
        from dataclasses import replace

        return replace(self, name=f"{self.name}, {category} x{factor:g}",
                       **{category: self.delay(category) * factor})

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "ns": {c: self.delay(c) for c in PATH_CATEGORIES}, "sources": dict(self.sources)}


UNIFORM_DELAYS = DelayModel(name="uniform (every cell 1: delay = cell count)", lut=1.0, carry=1.0, muxf=1.0, dsp=1.0,
                            other=1.0, sources=(("all", "the earlier model: a DSP or a carry cell counts like a LUT"),))

_NO_CLB_FIGURE = ("assumption: no LUT/CARRY delay figure found in {doc}'s switching characteristics (the 7-series "
                  "and UltraScale+ CLB timing parameters are named in UG474/UG574, their values were not found)")
PER_CELL_DELAYS = {
    # Zynq-7000, speed grade -1 (the zedboard's xc7z020clg484-1)
    "xc7": DelayModel(
        name="xc7 per-cell delays (DS187 -1; labelled assumptions where no figure was found)",
        lut=0.5, carry=0.15, muxf=0.3, dsp=4.0, other=0.5,
        sources=(("lut", _NO_CLB_FIGURE.format(doc="DS187") + "; 0.5 ns = a LUT level (~0.1 ns) plus a local route"),
                 ("carry", _NO_CLB_FIGURE.format(doc="DS187") + "; 0.15 ns per CARRY4 on the dedicated chain"),
                 ("muxf", "assumption: 0.3 ns per MUXF7/F8"),
                 ("dsp", "assumption: DS187's DSP48E1 combinational delays were not found; 4.0 ns, above the "
                         "2.96 ns that DS925 Table 'DSP48 Slice Switching Characteristics' allows the faster 16 nm "
                         "family (1 / FMAX_NOPIPELINEREG, -1 at 0.85 V: 338 MHz)"),
                 ("other", "assumption: like a LUT level"))),
    # Zynq UltraScale+, speed grade -1 at VCCINT = 0.85 V
    "xcup": DelayModel(
        name="xcup per-cell delays (DS925 -1, 0.85 V; labelled assumptions where no figure was found)",
        lut=0.35, carry=0.1, muxf=0.2, dsp=2.96, other=0.35,
        sources=(("lut", _NO_CLB_FIGURE.format(doc="DS925") + "; 0.35 ns per LUT level with a local route"),
                 ("carry", _NO_CLB_FIGURE.format(doc="DS925") + "; 0.1 ns per CARRY8"),
                 ("muxf", "assumption: 0.2 ns per MUXF7/F8/F9"),
                 ("dsp", "DS925 (Zynq UltraScale+ MPSoC DC and AC Switching Characteristics), table 'DSP48 Slice "
                         "Switching Characteristics': FMAX_NOPIPELINEREG (without MREG/ADREG) 338 MHz at -1, 0.85 V; "
                         "1/FMAX = 2.96 ns register to register, an upper bound of the DSP's combinational delay"),
                 ("other", "assumption: like a LUT level"))),
}


@dataclass(frozen=True, kw_only=True)
class MacCostPoint:
    """One synthesised FP-MAC with MAX_FB = ``fb``: mapped cell counts, logic depth (cells) and its cell types.

    ``path``: the cells on the longest path by category (``PATH_CATEGORIES``,
    pairs of category and count, summing to ``depth``); empty when unknown,
    in which case only :data:`UNIFORM_DELAYS` can time the point.
    """

    fb: int
    lut: int
    ff: int
    dsp: int
    carry: int
    depth: int
    path: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        if self.path:
            if any(category not in PATH_CATEGORIES for category, _ in self.path):
                raise ValueError(f"FB={self.fb}: path categories must be among {PATH_CATEGORIES}, got {self.path}")
            if sum(count for _, count in self.path) != self.depth:
                raise ValueError(f"FB={self.fb}: the path's cells {self.path} do not add up to depth {self.depth}")

    def delay(self, model: DelayModel) -> float:
        """Critical-path delay (ns, or cells under the uniform model) of this point under ``model``."""
        if model == UNIFORM_DELAYS:
            return float(self.depth)
        if not self.path:
            raise ValueError(f"FB={self.fb}: no cell types of the critical path are known; only the uniform delay "
                             "model applies")
        return model.path_delay(dict(self.path))

    def area(self, metric: str) -> float:
        """Area in LUT-equivalents under ``metric`` (see the module docstring)."""
        if metric == "lut":
            return float(self.lut)
        if metric == "weighted":
            return self.lut + FF_LUT_EQUIVALENT * self.ff + DSP_LUT_EQUIVALENT * self.dsp
        raise ValueError(f"unknown area metric {metric!r}; expected one of {AREA_METRICS}")


# Yosys 0.23 (git sha1 7ce5011c24b), `synth_xilinx -family xc7 -top fpmac -flatten -noiopad -noclkbuf -abc9`,
# rtl/fpmac with fpmac.v sha256 b46fecc29956..., EXP_BITS=8, nearest_even; measured for this module (the cell
# types on each longest path re-measured with the same Yosys and RTL: every count and depth reproduced).
FALLBACK_XC7 = tuple(MacCostPoint(fb=fb, lut=lut, ff=ff, dsp=dsp, carry=carry, depth=depth,
                                  path=tuple(sorted(path.items())))
                     for fb, lut, ff, dsp, carry, depth, path in (
                         (1, 231, 75, 0, 41, 16, {"carry": 7, "lut": 9}),
                         (2, 323, 88, 0, 46, 17, {"carry": 4, "lut": 11, "muxf": 2}),
                         (3, 381, 95, 0, 44, 17, {"carry": 7, "lut": 9, "muxf": 1}),
                         (4, 406, 95, 1, 50, 24, {"carry": 6, "dsp": 1, "lut": 17}),
                         (5, 501, 100, 1, 52, 22, {"carry": 5, "dsp": 1, "lut": 16}),
                         (6, 542, 105, 1, 54, 23, {"carry": 6, "dsp": 1, "lut": 16}),
                         (7, 595, 110, 1, 55, 23, {"carry": 5, "dsp": 1, "lut": 17}),
                         (8, 704, 118, 1, 58, 26, {"carry": 7, "dsp": 1, "lut": 16, "muxf": 2}),
                         (9, 754, 123, 1, 60, 28, {"carry": 7, "dsp": 1, "lut": 18, "muxf": 2}),
                         (10, 805, 128, 1, 61, 30, {"carry": 7, "dsp": 1, "lut": 22}),
                         (12, 904, 138, 1, 65, 32, {"carry": 8, "dsp": 1, "lut": 21, "muxf": 2}),
                         (14, 1060, 148, 1, 68, 32, {"carry": 8, "dsp": 1, "lut": 19, "muxf": 4}),
                         (16, 1241, 161, 1, 73, 34, {"carry": 9, "dsp": 1, "lut": 23, "muxf": 1}),
                         (20, 1564, 198, 2, 81, 38, {"carry": 11, "dsp": 2, "lut": 23, "muxf": 2}),
                         (23, 1594, 213, 2, 84, 38, {"carry": 9, "dsp": 2, "lut": 26, "muxf": 1})))
FALLBACK_SOURCE = ("fallback table (embedded in codesign.energy.abvs_cost: Yosys 0.23 xc7 sweep of rtl/fpmac, "
                   "fpmac.v sha256 b46fecc29956)")


def points_from_report(cost: Any, *, family: str = "xc7", exp_bits: int = 8,
                       rounding: str = "nearest_even") -> tuple[MacCostPoint, ...]:
    """The (family, exp_bits, rounding) series of a loaded :class:`~codesign.pe.fpmac.estimate.FpmacCost`."""
    return tuple(MacCostPoint(fb=e.max_fb, lut=e.counts.lut, ff=e.counts.ff, dsp=e.counts.dsp, carry=e.counts.carry,
                              depth=e.depth.cells, path=tuple(sorted(e.depth.by_category.items())))
                 for e in cost.series(family, exp_bits=exp_bits, rounding=rounding))


def _interpolate(points: tuple[MacCostPoint, ...], fb: int, value) -> tuple[float, bool]:
    """Linear interpolation of ``value(point)`` at ``fb``; second item: True if ``fb`` was swept."""
    by_fb = {p.fb: p for p in points}
    if fb in by_fb:
        return float(value(by_fb[fb])), True
    if fb < points[0].fb:
        return float(value(points[0])), False
    upper = next(p for p in points if p.fb > fb)
    lower = max((p for p in points if p.fb < fb), key=lambda p: p.fb)
    weight = (fb - lower.fb) / (upper.fb - lower.fb)
    return (1 - weight) * value(lower) + weight * value(upper), False


class FpMacEnergyModel:
    """Energy per FB-float MAC (pJ) for FB in 1..23; call it with an FB to price one MAC.

    Everything is computed once at construction, so the model is a pure,
    deterministic function of its inputs.
    """

    def __init__(self, points: tuple[MacCostPoint, ...] | list[MacCostPoint], *, source: str, timing_fb: int,
                 area_metric: str = "lut", voltage: VoltageModel | None = None,
                 table: EnergyTable | None = None, delay: DelayModel = UNIFORM_DELAYS) -> None:
        points = tuple(sorted(points, key=lambda p: p.fb))
        if not points:
            raise ValueError("the energy model needs at least one synthesised point")
        if len({p.fb for p in points}) != len(points):
            raise ValueError("duplicate FB in the cost points")
        if area_metric not in AREA_METRICS:
            raise ValueError(f"unknown area metric {area_metric!r}; expected one of {AREA_METRICS}")
        if points[-1].fb != ANCHOR_FB:
            raise ValueError(f"the cost points must include FB={ANCHOR_FB} (the FP32 anchor); "
                             f"got FB {[p.fb for p in points]}")
        if not (isinstance(timing_fb, int) and 1 <= timing_fb <= MAX_FB):
            raise ValueError(f"timing_fb={timing_fb!r} must be an int in 1..{MAX_FB}")
        if any(p.area(area_metric) <= 0 or p.depth <= 0 for p in points):
            raise ValueError("every cost point needs a positive area and depth")
        self.points = points
        self.source = source
        self.delay_model = delay
        for point in points:
            point.delay(delay)  # every point can be timed under this model (raises with the reason otherwise)
        self.timing_fb = timing_fb
        self.area_metric = area_metric
        self.voltage = voltage or VoltageModel()
        self.table = table or horowitz_45nm()
        self.anchor_pj = self.table.fp32_mul + self.table.fp32_add
        anchor_area = self.area(ANCHOR_FB)
        reference_delay = self.delay(timing_fb)
        self._supply: dict[int, float | None] = {}
        self._energy: dict[int, float | None] = {}
        for fb in range(1, MAX_FB + 1):
            try:
                volts = self.voltage.min_supply(self.delay(fb), reference_delay)
            except ValueError:
                volts = None  # cannot meet the timing circuit's clock: only possible for FB wider than timing_fb
            self._supply[fb] = volts
            self._energy[fb] = None if volts is None else \
                self.anchor_pj * self.area(fb) / anchor_area * (volts / self.voltage.supply_v) ** 2

    def area(self, fb: int) -> float:
        """Area (LUT-equivalents) of the FB-bit FP-MAC, interpolated between swept FBs."""
        return _interpolate(self.points, self._check(fb), lambda p: p.area(self.area_metric))[0]

    def depth(self, fb: int) -> float:
        """Logic depth (cells on the longest path) of the FB-bit FP-MAC, interpolated between swept FBs."""
        return _interpolate(self.points, self._check(fb), lambda p: p.depth)[0]

    def delay(self, fb: int) -> float:
        """Critical-path delay of the FB-bit FP-MAC under the delay model (ns; cells under the uniform model)."""
        return _interpolate(self.points, self._check(fb), lambda p: p.delay(self.delay_model))[0]

    def measured(self, fb: int) -> bool:
        return any(p.fb == self._check(fb) for p in self.points)

    def supply_v(self, fb: int) -> float:
        """Minimum supply (V) at which the FB-bit MAC meets the clock of ``timing_fb`` at the nominal supply."""
        volts = self._supply[self._check(fb)]
        if volts is None:
            raise ValueError(f"FB={fb} cannot meet the FB={self.timing_fb} clock below "
                             f"{self.voltage.max_supply_v} V")
        return volts

    def energy_pj(self, fb: int) -> float:
        """Energy (pJ) of one FB-bit multiply-accumulate at its minimum supply."""
        energy = self._energy[self._check(fb)]
        if energy is None:
            self.supply_v(fb)  # raises with the reason
        return energy

    def __call__(self, fb: int) -> float:
        return self.energy_pj(fb)

    @staticmethod
    def _check(fb: int) -> int:
        if isinstance(fb, bool) or not isinstance(fb, int) or not 1 <= fb <= MAX_FB:
            raise ValueError(f"FB={fb!r} must be an int in 1..{MAX_FB}")
        return fb

    def describe(self, fbs: list[int] | None = None) -> dict[str, Any]:
        """The model's provenance, parameters and per-FB table (area, depth, V, pJ), JSON-ready."""
        rows = []
        for fb in fbs or range(1, MAX_FB + 1):
            volts = self._supply[self._check(fb)]
            rows.append({"fb": fb, "area": round(self.area(fb), 3), "depth": round(self.depth(fb), 3),
                         "delay": round(self.delay(fb), 6),
                         "measured": self.measured(fb), "supply_v": None if volts is None else round(volts, 6),
                         "energy_pj": None if volts is None else round(self._energy[fb], 6)})
        return {
            "source": self.source, "area_metric": self.area_metric, "timing_fb": self.timing_fb,
            "delay_model": self.delay_model.describe(),
            "anchor": {"fb": ANCHOR_FB, "energy_pj": self.anchor_pj, "at_supply_v": self.voltage.supply_v,
                       "from": f"{self.table.source}: fp32 multiply + add"},
            "voltage_model": {"law": "alpha-power (Sakurai & Newton 1990): delay ∝ path delay·V/(V−V_t)^a",
                              "supply_v": self.voltage.supply_v, "threshold_v": self.voltage.threshold_v,
                              "alpha_power": self.voltage.alpha_power, "min_supply_v": self.voltage.min_supply_v,
                              "max_supply_v": self.voltage.max_supply_v},
            "per_fb": rows,
        }


def fpmac_energy_model(report: str | Path | None = None, *, timing_fb: int, family: str = "xc7",
                       area_metric: str = "lut", voltage: VoltageModel | None = None,
                       table: EnergyTable | None = None, delay: DelayModel | None = None) -> FpMacEnergyModel:
    """The energy model from ``fpmac_cost.json`` at ``report``, or from :data:`FALLBACK_XC7`.

    ``delay`` defaults to the family's per-cell delays (:data:`PER_CELL_DELAYS`);
    pass :data:`UNIFORM_DELAYS` for the cell-count model.

    The fallback is used when ``report`` is empty/None or the file does not
    exist (the model's ``source`` says so); a file that exists but fails
    validation raises :class:`~codesign.pe.fpmac.estimate.FpmacCostError`.
    """
    if delay is None:
        if family not in PER_CELL_DELAYS:
            raise ValueError(f"no per-cell delays for family {family!r} (have {sorted(PER_CELL_DELAYS)}); pass delay")
        delay = PER_CELL_DELAYS[family]
    if report and Path(report).is_file():
        from codesign.pe.fpmac.estimate import load_fpmac_cost

        cost = load_fpmac_cost(Path(report))
        points = points_from_report(cost, family=family)
        try:
            current = "matches" if cost.sources_match() else "does NOT match"
        except FileNotFoundError:
            current = "cannot be compared with"
        source = (f"Yosys report {report} ({cost.tool_version}, family {family}; its RTL {current} "
                  "the current rtl/fpmac)")
    else:
        if family != "xc7":
            raise ValueError(f"no report for family {family!r} and the fallback table is xc7 only")
        points = FALLBACK_XC7
        source = FALLBACK_SOURCE if not report else f"{FALLBACK_SOURCE}; report {report} absent"
    return FpMacEnergyModel(points, source=source, timing_fb=timing_fb, area_metric=area_metric, voltage=voltage,
                            table=table, delay=delay)
