"""How a stream PE is built for the stream bench: inside the HDL harness that drives it cycle by cycle.

The harness (``rtl/bench/stream_harness.v``) offers the input words, draws the
gaps and backpressure and logs every handshake in the simulator, so that the
cocotb bench (:mod:`codesign.hw.stream_bench`) runs Python once before and
once after the simulation, not once a clock cycle. Here is what the build needs:
the harness as the top, the PE by build defines, and memories sized to the
vector file (a parameter set of its own, so each size has its own build).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from codesign.hw.vectors import read_transactions
from codesign.resources import data_dir

HARNESS_TOP = "stream_harness"
MIN_LOG2 = 4  # smallest memory the harness is built with: 16 words


@dataclass(frozen=True)
class HarnessBuild:
    """What :func:`codesign.hw.rtlsim.run_cocotb` builds: the PE's ``sources`` and the harness, ``toplevel``,
    the harness's ``parameters`` and the ``build_args`` (defines) naming the PE and its parameters."""

    sources: tuple[Path, ...]
    toplevel: str
    parameters: dict[str, int]
    build_args: tuple[str, ...]


def harness_source() -> Path:
    return data_dir("rtl") / "bench" / "stream_harness.v"


def memory_log2(count: int) -> int:
    """log2 of the smallest power-of-two memory (at least ``2**MIN_LOG2`` words) holding ``count`` words."""
    return max(MIN_LOG2, (max(int(count), 1) - 1).bit_length())


def vector_sizes(vectors: Path, *, pe: str, word_parts: int) -> tuple[int, int]:
    """Input stream words (of ``word_parts`` file words, a short tail padded) and transactions of a transaction
    file."""
    transactions, _ = read_transactions(vectors, pe=pe)
    return sum(-(-len(words_in) // word_parts) for words_in, _ in transactions), len(transactions)


def harness_build(*, sources: Sequence[Path], dut: str, dut_parameters: Mapping[str, int], word_parts: int,
                  words_in: int, transactions: int) -> HarnessBuild:
    """The harness around PE top ``dut`` (``dut_parameters`` its Verilog parameters, integers) on streams of
    ``word_parts`` 32-bit parts, sized for ``words_in`` input stream words in ``transactions`` transactions."""
    if word_parts not in (1, 2, 4):
        raise ValueError(f"word_parts={word_parts} must be 1, 2 or 4")
    for name, value in dut_parameters.items():
        if not name.isidentifier() or isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{dut}'s parameter {name}={value!r} must be an identifier with an integer value")
    assignments = ",".join(f".{name}({value})" for name, value in sorted(dut_parameters.items()))
    return HarnessBuild(
        sources=(*map(Path, sources), harness_source()),
        toplevel=HARNESS_TOP,
        parameters={"WIDTH": 32 * word_parts, "DEPTH_LOG2": memory_log2(words_in),
                     "STARTS_LOG2": memory_log2(transactions)},
        build_args=(f"-DSTREAM_DUT={dut}", f"-DSTREAM_DUT_PARAMETERS={assignments}"))


__all__ = ["HARNESS_TOP", "HarnessBuild", "harness_build", "harness_source", "memory_log2", "vector_sizes"]
