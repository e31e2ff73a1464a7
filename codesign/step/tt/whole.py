"""The golden TT step with each contraction computed whole: one BLAS product instead of its PE calls.

:func:`codesign.step.tt.step.run_contractions` cuts every contraction of a
stage into the PE calls of its schedule (:func:`codesign.step.tt.schedule.plan_step`),
runs them on a runner and adds their partial sums in int64. On the golden
kernels (:class:`~codesign.step.tt.step.GoldenRunner`) that is an einsum and a
saturating scan per call, most of a desktop step's time. Its result is
nevertheless a plain integer contraction whenever no call saturates: the
host adds the partial sums exactly, so ``Z`` is the exact sum of products
over the whole summed axis, whichever way the schedule cut it (PE2 or PE1
calls, forward split or not, PE3 samples added one by one). The schedule
caps every call's summed length so that no accumulator can saturate
(:func:`codesign.step.tt.schedule.max_terms`), so this is the case in every
step it plans.

:class:`WholeRunner` computes such a ``Z`` in one product per contraction,
and only where it can prove the result exact; it re-proves what the plan
promises from the data it is given:

* no call saturates: the longest summed length of one call times the
  largest |code| of each operand stays within the accumulator of the PE
  that takes the call (``2^(acc_bits - 1) - 1``);
* every code lies in the range of the PE operand it goes to (the golden
  kernels refuse others);
* the product is exact in the arithmetic chosen for it: every partial sum
  of a contraction is a sum of some of its products, so its magnitude is
  at most ``bound`` = the whole summed length times the two largest
  |codes|. Below 2^24 float32 holds every such integer exactly, below
  2^53 float64 does (BLAS may add in any order or fuse a multiply-add:
  every intermediate is an integer it holds), else int64 (exact below
  2^63, refused above).

A contraction that fails the first two checks goes to the golden kernels
call by call (:attr:`WholeRunner.fallbacks` counts it), which give the
saturated or refused result the PEs would. The checks are on the codes
given, not only their widths: a schedule whose calls could saturate on
other codes (:func:`~codesign.step.tt.schedule.max_terms` not kept) is
still computed whole where these codes cannot, since the calls then give
the exact sums too. The runner counts the PE calls
a contraction stands for (the plan's), so :class:`~codesign.step.tt.runners.Counting`
and the loops' transaction and MAC figures are the plan's, as on the golden
kernels. Hardware is still checked against the per-call golden kernels
(csim, the board's IPs, streams, the step demo); this runner is for
training on the desktop, where only the step's numbers matter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

import numpy as np

from codesign.step.tt.schedule import StepHardware, StepPlan
from codesign.step.tt.step import GoldenRunner, run_contractions

FLOAT32_LIMIT = 1 << 24  # partial sums below this magnitude are exact in float32 (24-bit significand)
FLOAT64_LIMIT = 1 << 53  # ... in float64 (53-bit significand)
INT64_LIMIT = 1 << 63  # ... in int64; a bound at or above it is refused

Jobs = Sequence[Tuple[int, np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class WholeFacts:
    """What a contraction's exactness and counts need from its plan, read once per plan.

    ``calls``: the PE calls it is cut into; ``macs``: their products
    (padding included, as :class:`~codesign.step.tt.runners.Counting` counts
    a call's: ``I·J·K·L`` of each call); ``summed``: products in one result
    word of the whole contraction (``J`` on PE2, ``J·K`` on PE1 and for
    PE3's samples); ``call_terms``: the most products one call adds into an
    accumulator (0 for PE3, which adds nothing); ``acc_limit``: the largest
    magnitude every accumulator of its calls' PEs holds, ``2^(acc_bits-1) -
    1`` of the narrowest; ``a_range``, ``b_range``: the codes every PE that
    takes a call accepts in ``A`` and ``B`` (a swapped forward call is
    PE1's, with PE1's operand widths).
    """

    calls: int
    macs: int
    summed: int
    call_terms: int
    acc_limit: int
    a_range: Tuple[int, int]
    b_range: Tuple[int, int]


FACTS_CACHE = 64  # plans whose facts are kept (as codesign.step.tt.step keeps call cuts)
_facts: Dict[int, Tuple[StepPlan, List[WholeFacts]]] = {}


def _range(bits: int) -> Tuple[int, int]:
    """Smallest and largest signed ``bits``-wide code."""
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def _narrowest(ranges: Sequence[Tuple[int, int]]) -> Tuple[int, int]:
    return max(low for low, _ in ranges), min(high for _, high in ranges)


def plan_facts(plan: StepPlan) -> List[WholeFacts]:
    """:class:`WholeFacts` of every contraction of ``plan``, in its order (made once per plan and kept)."""
    entry = _facts.get(id(plan))
    if entry is not None and entry[0] is plan:  # the entry holds the plan, so its id is not reused while kept
        return entry[1]
    hardware = plan.hardware
    per: List[Dict[str, list]] = [{"macs": [], "terms": [], "acc": [], "a": [], "b": []} for _ in plan.contractions]
    for call in plan.calls:
        i, j, k, l = call.dims
        pe = "tt1" if call.swapped else call.pe
        spec = hardware.spec(pe)
        mine = per[call.index]
        mine["macs"].append(i * j * k * l)
        mine["a"].append(_range(spec.a_bits))
        mine["b"].append(_range(spec.b_bits))
        if pe != "tt3":  # PE3 forms exact products and adds nothing
            mine["terms"].append(j * k if pe == "tt1" and not call.swapped else j)
            mine["acc"].append((1 << (spec.acc_bits - 1)) - 1)
    facts = []
    for item, mine in zip(plan.contractions, per):
        _, j_dim, k_dim, _ = item.dims
        facts.append(WholeFacts(calls=len(mine["macs"]), macs=sum(mine["macs"]),
                                summed=j_dim if item.pe == "tt2" else j_dim * k_dim,
                                call_terms=max(mine["terms"], default=0),
                                acc_limit=min(mine["acc"], default=INT64_LIMIT - 1),
                                a_range=_narrowest(mine["a"]), b_range=_narrowest(mine["b"])))
    if len(_facts) >= FACTS_CACHE:
        _facts.pop(next(iter(_facts)))
    _facts[id(plan)] = (plan, facts)
    return facts


def stood_for(plan: StepPlan, indices: Sequence[int]) -> Tuple[int, int]:
    """``(calls, MACs)`` of the PE calls of ``plan``'s contractions ``indices``: what a runner that computes them
    whole counts, so that transaction and MAC figures stay the plan's."""
    facts = plan_facts(plan)
    return sum(facts[index].calls for index in indices), sum(facts[index].macs for index in indices)


def _extent(codes: np.ndarray, allowed: Tuple[int, int], scan: bool) -> int | None:
    """max |code| of ``codes``, or None where a code lies outside ``allowed`` or is not an integer code.

    An integer type no wider than the allowed codes holds nothing else: unless
    ``scan``, its own range stands for the maximum (a bound, which keeps every
    proof valid and saves a pass over the operand)."""
    if codes.size == 0:
        return 0
    if codes.dtype.kind != "i":
        return None
    low, high = allowed
    info = np.iinfo(codes.dtype)
    if not scan and info.min >= low and info.max <= high:
        return -int(info.min)
    smallest, largest = int(codes.min()), int(codes.max())
    if smallest < low or largest > high:
        return None
    return max(-smallest, largest)


def _peaks(fact: WholeFacts, a: np.ndarray, b: np.ndarray) -> Tuple[int, int] | None:
    """max |code| of ``A`` and ``B`` (or bounds of them), None where a code is refused. The operands' types bound
    them first; where those bounds leave a call's sums beyond its accumulator or the contraction beyond float32's
    exact integers, the actual codes are scanned, which often bring it within (gradient codes stay well below
    their 16-bit range)."""
    peaks = _extent(a, fact.a_range, False), _extent(b, fact.b_range, False)
    if None in peaks:
        return None
    product = peaks[0] * peaks[1]
    if fact.summed * product < FLOAT32_LIMIT and fact.call_terms * product <= fact.acc_limit:
        return peaks
    peaks = _extent(a, fact.a_range, True), _extent(b, fact.b_range, True)
    return None if None in peaks else peaks


def arithmetic(bound: int) -> np.dtype:
    """The narrowest type whose arithmetic is exact for partial sums up to ``bound`` (a magnitude): float32 below
    :data:`FLOAT32_LIMIT`, float64 below :data:`FLOAT64_LIMIT`, else int64 (exact below 2^63; refused above)."""
    if bound < FLOAT32_LIMIT:
        return np.dtype(np.float32)
    if bound < FLOAT64_LIMIT:
        return np.dtype(np.float64)
    if bound < INT64_LIMIT:
        return np.dtype(np.int64)
    raise OverflowError(f"partial sums up to {bound} do not fit 64 bits")


def whole_product(pe: str, a: np.ndarray, b: np.ndarray, dtype: np.dtype,
                  scratch: Dict[Tuple[str, str], np.ndarray] | None = None) -> np.ndarray:
    """The whole contraction of one PE's operand layout, in ``dtype``'s arithmetic, as a new int64 array.

    PE2: ``Z[i, l, k] = sum_j A[i, j, k] B[l, j]`` (``A`` (I, J, K), ``B``
    (L, J)), a stack of ``B @ A[i]``; PE1: ``Z[i, l] = sum_{j, k} A[i, j,
    k] B[l, j, k]``, one product of the flattened rows; PE3 (the dense
    route's outer products of every sample, which the host adds):
    ``Z[i, l] = sum_s A[s, i] B[s, l]``, ``A^T B`` with ``A`` (samples, N)
    and ``B`` (samples, M). Exact only when ``dtype`` is (:func:`arithmetic`).

    ``scratch``: arrays kept from earlier products (by role and type), reused
    for the float operands and product, which the int64 result replaces: a
    step's large temporaries would otherwise be new memory every time, whose
    first touch costs about as much as the conversions themselves.
    """
    def take(role: str, shape: Tuple[int, ...]) -> np.ndarray:
        size = int(np.prod(shape))
        if scratch is None:
            return np.empty(shape, dtype)
        kept = scratch.get((role, dtype.name))
        if kept is None or kept.size < size:
            kept = scratch[role, dtype.name] = np.empty(size, dtype)
        return kept[:size].reshape(shape)

    fa, fb = take("a", a.shape), take("b", b.shape)
    np.copyto(fa, a, casting="unsafe")  # codes: exact in every arithmetic chosen for them
    np.copyto(fb, b, casting="unsafe")
    if pe == "tt2":  # (L, J) @ (I, J, K) -> (I, L, K)
        left, right, shape = fb, fa, (a.shape[0], b.shape[0], a.shape[2])
    elif pe == "tt1":
        left, right, shape = fa.reshape(a.shape[0], -1), fb.reshape(b.shape[0], -1).T, (a.shape[0], b.shape[0])
    else:
        left, right, shape = fa.T, fb, (a.shape[1], b.shape[1])
    if dtype == np.int64:  # the product is the result: new memory
        return np.matmul(left, right)
    return np.matmul(left, right, out=take("z", shape)).astype(np.int64)


class WholeRunner:
    """Computes a stage's contractions whole (:func:`whole_product`) where that is provably exact, else on the
    golden kernels call by call; ``calls`` counts the PE calls it stood for (the plan's), ``fallbacks`` the
    contractions that went call by call, ``arithmetic`` the contractions per type of arithmetic. It keeps the
    float operands and products of the largest contraction so far for reuse (``scratch``; tens of MB at rank 16
    of paper 003's network).

    ``run`` answers PE calls one by one on the golden kernels, for a wrapper
    that hands over single calls (:class:`~codesign.step.tt.runners.Streamed`
    has no whole-contraction pass-through)."""

    name = "whole"

    def __init__(self) -> None:
        self.golden = GoldenRunner()
        self.calls = 0
        self.fallbacks = 0
        self.arithmetic: Dict[str, int] = {}
        self.scratch: Dict[Tuple[str, str], np.ndarray] = {}  # whole_product's reusable float arrays

    def __getstate__(self) -> Dict[str, object]:
        """Pickled without the scratch arrays: work space, not state (a training checkpoint stays small)."""
        return {**self.__dict__, "scratch": {}}

    def run(self, hardware: StepHardware, calls) -> List[np.ndarray]:
        self.calls += len(calls)
        return self.golden.run(hardware, calls)

    def contract_whole(self, plan: StepPlan, jobs: Jobs) -> List[np.ndarray]:
        """The full int64 result of every contraction ``(index, A, B)`` of ``jobs`` (one stage), as
        :func:`codesign.step.tt.step.run_contractions` gives it from the calls' partial sums."""
        facts = plan_facts(plan)
        out = []
        for index, a, b in jobs:
            item, fact = plan.contractions[index], facts[index]
            self.calls += fact.calls
            a, b = np.asarray(a), np.asarray(b)
            peaks = _peaks(fact, a, b)
            if peaks is None or fact.call_terms * peaks[0] * peaks[1] > fact.acc_limit:
                self.fallbacks += 1  # a code is refused, or a call could saturate: the PEs' own answer
                out.append(run_contractions(plan, [(index, a, b)], self.golden)[0])
                continue
            dtype = arithmetic(fact.summed * peaks[0] * peaks[1])
            self.arithmetic[dtype.name] = self.arithmetic.get(dtype.name, 0) + 1
            out.append(whole_product(item.pe, a, b, dtype, self.scratch))
        return out


__all__ = ["FLOAT32_LIMIT", "FLOAT64_LIMIT", "INT64_LIMIT", "WholeFacts", "WholeRunner", "arithmetic", "plan_facts",
           "stood_for", "whole_product"]
