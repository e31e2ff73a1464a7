"""The scales of one TT layer step: the fraction bits each tensor is rounded at, and what its tracker keeps.

Two rules (:func:`codesign.numerics.scales.aim_scale`): ``"exact"`` aims a
tensor's scale at the tensor itself, so its rounding waits for the whole
tensor (the host rounds it); ``"tracked"`` (paper 003, Sec. 3.3) rounds it at
the scale aimed from earlier steps' running mean |x|, known before the PE
produces it, so the PE's rounding stage can round its results as it sends
them (``docs/accelerator.md``, "Rounding stage"). Under the tracked rule the
scale a tensor is rounded at (``used``) and the one its tracker holds for the
next step differ, so the step reads the first and returns the second.

What a PE result's mean |x| is, exactly: its accumulator words ``z`` at
``z_frac`` fraction bits sum to an integer ``total`` (the rounding stage's
``sum_abs``), and the mean is ``total / count * 2^-z_frac`` correctly
rounded to float64, which is what :func:`codesign.numerics.scales.mean_abs`
gives on the exact float64 values of the same tensor (their sum is exact
below 2^53 code units), so the torch layer and this step observe the same
float.
"""

from __future__ import annotations

import math
from typing import Dict, List, Mapping, Sequence, Tuple

import numpy as np

from codesign.numerics.scales import NO_MEAN, UNSET, aim_scale, mean_abs
from codesign.step.tt.rounding import abs_sum_and_peak, rescale, scale_and_round


class ScaleBook:
    """The trackers (fraction bits), running means and used fraction bits of one layer step, by tracker name.

    ``trackers`` and ``means`` start as the layer holds them and end as the
    next step should find them; ``used`` is what this step rounded at (a
    tensor not yet rounded in this step has no entry)."""

    def __init__(self, trackers: Mapping[str, Sequence[int]], means: Mapping[str, Sequence[float]], *, rule: str,
                 momentum: float) -> None:
        self.trackers: Dict[str, List[int]] = {name: [int(v) for v in values] for name, values in trackers.items()}
        self.means: Dict[str, List[float]] = {name: [float(v) for v in means[name]] if name in means
                                              else [NO_MEAN] * len(values) for name, values in self.trackers.items()}
        self.used: Dict[Tuple[str, int], int] = {}
        self.rule, self.momentum = rule, float(momentum)

    def frac(self, name: str, index: int) -> int:
        """The fraction bits tensor ``(name, index)`` was rounded at in this step."""
        return self.used[(name, index)]

    def _aim(self, name: str, index: int, observed: float, *, bits: int, headroom_bits: int, update: bool) -> int:
        used, kept, mean = aim_scale(observed, rule=self.rule, current=self.trackers[name][index],
                                     mean=self.means[name][index], momentum=self.momentum, bits=bits,
                                     headroom_bits=headroom_bits, update=update)
        self.trackers[name][index], self.means[name][index] = kept, mean
        self.used[(name, index)] = used
        return used

    def host(self, name: str, index: int, values: np.ndarray, *, bits: int, headroom_bits: int, update: bool,
             observed: float | None = None) -> int:
        """The scale of a float tensor the host quantises (the batch, an output gradient), by either rule.
        ``observed``: the values' :func:`~codesign.numerics.scales.mean_abs` where the host took it before (a batch
        it staged), else taken here."""
        observed = mean_abs(values) if observed is None else observed
        return self._aim(name, index, observed, bits=bits, headroom_bits=headroom_bits, update=update)

    def round(self, name: str | None, index: int, z: np.ndarray, z_frac: int, *, bits: int, headroom_bits: int,
              update: bool = True) -> Tuple[int, np.ndarray]:
        """The scale and ``bits``-wide codes of a PE result ``z`` (accumulator words at ``z_frac``): one pass over
        |z| gives the sum the rule reads and the largest magnitude rounding needs. ``name`` None: a tensor with
        no tracker (aimed at itself every time, as the dense route's partial results are)."""
        if name is None or self.rule == "exact":
            current = UNSET if name is None else self.trackers[name][index]
            frac, codes = scale_and_round(z, z_frac, bits=bits, headroom_bits=headroom_bits, current=current,
                                          choose=update or current == UNSET)
            if name is not None:
                self.trackers[name][index] = self.used[(name, index)] = frac
            return frac, codes
        z = np.ascontiguousarray(z, dtype=np.int64)
        total, peak = abs_sum_and_peak(z)
        observed = math.ldexp(total / z.size, -z_frac) if z.size else 0.0
        frac = self._aim(name, index, observed, bits=bits, headroom_bits=headroom_bits, update=update)
        return frac, rescale(z, z_frac, frac, bits, peak=peak)

    def observe(self, name: str, index: int, total: int, count: int, z_frac: int, *, bits: int,
                headroom_bits: int) -> int:
        """A PE result rounded on the PE at this step's tracked scale: the sum of its |acc| (``total``, the
        calls' records) over ``count`` words at ``z_frac`` moves the tracker on; returns the scale it was
        rounded at. Only the tracked rule knows a scale before the results, so only it can be observed so."""
        if self.rule != "tracked" or self.trackers[name][index] == UNSET:
            raise ValueError(f"{name}[{index}]: a PE rounds at a tracked scale set by an earlier step")
        observed = math.ldexp(total / count, -z_frac) if count else 0.0
        return self._aim(name, index, observed, bits=bits, headroom_bits=headroom_bits, update=True)

    def as_tuples(self) -> Tuple[Dict[str, Tuple[int, ...]], Dict[str, Tuple[float, ...]]]:
        """The trackers and means to store for the next step."""
        return ({name: tuple(v) for name, v in self.trackers.items()},
                {name: tuple(v) for name, v in self.means.items()})


__all__ = ["ScaleBook"]
