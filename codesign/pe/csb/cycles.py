"""Cycle model of one transaction of the CSB PE RTL (rtl/csb/csb_pe.v), without stalls.

Why a model: layer-level schedules (:mod:`codesign.step.csb.schedule`) and the
design-space search need the PE's cycle count without simulating it; the RTL
tests check this model against cycle counts measured on the RTL.

The RTL runs one transaction in three phases, one after the other:

* **load**: every input word (header, index, operand sections) moves in one
  clock cycle; ``in_ready`` stays high from the header to the last word.
  ``load = n_in`` cycles, with ``n_in`` the words of the transaction
  (sections of bytes are packed four to a word, docs/csb.md).
* **compute**: one cycle per (entry, tap, chunk of ``P`` positions), all ``P``
  groups and ``b`` lanes working in that step (a two-stage pipeline: read
  addresses, then multiply-accumulate and write back; the last step's second
  stage overlaps the drain's first cycle, so it adds none): FP, EB and WG
  alike ``nnz * k^2 * ceil(OUT_POS / P)`` cycles, since EB, too, steps over
  the output positions and scatters into the input tile (no step on the
  halo), at stride 1 or 2 alike; on a ``packed`` build WG takes two cycles a
  step (half the lanes each: its lanes share no operand to pack). UPD
  computes while its gradient words stream in (0 cycles); a refused
  transaction (status 1, 2, 3) computes nothing.
* **drain**: one cycle to load the output register, then one word per cycle:
  the status word and (status 0) the result words. ``drain = 1 + n_out``.

Header flags (docs/csb.md): ``ZERO`` has the PE write the zero initial
section itself with ``in_ready`` low: FP and EB clear a word of the result
buffer (every group's bank, every lane) a cycle, ``rows * H * ceil(W / P)``
cycles for their result grid of ``H x W`` positions; WG a gradient word a
cycle, ``nnz * k^2`` (``load = n_in + zero cycles``). An
element-wise transaction (SELECT, SHR, RELU) computes nothing and streams: after
its header (and SELECT's ``V``) the PE loads the status into its output
register, then takes its last section's ``n`` words (``V``; SELECT's ``Z``) one
a cycle while it gives the register's word, each result given the cycle after
its word is taken (``compute = 0``, ``drain = 2``: the status load and the
last result; ``n = 0``: the status alone). ``CARRY`` leaves the initial
section out of the stream and takes no cycle for it (the sums are where the
``HOLD`` before left them; a SELECT with ``CARRY`` loads its ``Z`` words
alone); ``HOLD`` drains the status alone (``drain = 2``).
A ``CARRY`` the PE refuses (nothing of its op held) is its header alone, so
the words tell the model which it was.

``K1`` (header bit 14) runs FP, EB, WG and UPD as on the same PE built with
kernel 1 (``CsbSpec.run_as``): its load, compute and drain are that PE's.

A wide stream (``stream_bits`` 64 or 128, ``parts`` 2 or 4 32-bit parts a beat) moves a beat a cycle: ``n_in``
and ``n_out`` count beats (every section from a new beat, the results ``parts`` to a beat), and a ``ZERO`` WG
writes ``parts`` gradient words a cycle.

``total = load + compute + drain`` counts the clock cycles from the first
input handshake to the last output handshake, both included (the figure
``codesign.hw.stream_bench`` reports per transaction). Backpressure on the
output or gaps in the input add their cycles on top.
"""

from __future__ import annotations

from typing import Protocol

from codesign.numerics.records import keyword_record

OP_FP, OP_EB, OP_WG, OP_UPD = range(4)
OP_LOSS = 3  # element-wise op 3 (header flag EW)
LOSS_MAX_CLASSES = 32
LOSS_PARAM_FIELDS = 0x0FFF_003F  # P: recip_shift [5:0] (at most 48), the batch [27:16]
LOSS_NO_SAMPLE = 0xFFFF_FFFF
LOSS_QUOTIENT_CYCLES = 49  # floor(2^recip_shift / n), a dividend bit (48 down to 0) a cycle
LOSS_LANE_CYCLES = 33  # floor(Qn / S) of a lane, a bit a cycle
FLAG_ZERO, FLAG_G_FIRST, FLAG_LEFT, FLAG_EW, FLAG_HOLD, FLAG_CARRY = (1 << bit for bit in range(2, 8))
FLAG_S2, FLAG_K1 = 1 << 13, 1 << 14
RESERVED_MASK = 0xFFFF_FFFF & ~(0x3 | 0xFC | (0x1F << 8) | FLAG_S2 | FLAG_K1 | (0x1FF << 16))


class PeShape(Protocol):
    """The PE parameters the cycle count depends on (a ``CsbSpec`` has them)."""

    block_rows: int
    block_cols: int
    kernel: int
    out_h: int
    out_w: int
    batch: int
    parallel: int
    packed: bool
    parts: int  # 32-bit parts of a stream beat (stream_bits / 32)

    def run_as(self, *, kernel_one: bool) -> "PeShape":
        """The PE a ``K1`` transaction runs as (:meth:`codesign.pe.csb.spec.CsbSpec.run_as`)."""


@keyword_record
class TransactionCycles:
    """Clock cycles of one transaction, by phase (all in cycles)."""

    load: int
    compute: int
    drain: int

    def __post_init__(self) -> None:
        for name in ("load", "compute", "drain"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"{name}={value!r} must be a non-negative number of cycles")

    @property
    def total(self) -> int:
        """Cycles from the first input handshake to the last output handshake, both included."""
        return self.load + self.compute + self.drain


def _words(count_bytes: int) -> int:
    return -(-count_bytes // 4)


def _check_shape(pe: PeShape) -> None:
    for name, low, high in (("block_rows", 1, 16), ("block_cols", 1, 16), ("kernel", 1, 7), ("out_h", 1, None),
                            ("out_w", 1, None), ("batch", 1, 16), ("parallel", 1, 8)):
        value = getattr(pe, name)
        if not isinstance(value, int) or value < low or (high is not None and value > high):
            raise ValueError(f"{name}={value!r} is outside {low}..{high if high is not None else 'inf'}")


def compute_cycles(pe: PeShape, *, op: int, nnz: int) -> int:
    """Compute-phase cycles of an accepted transaction: one per (entry, tap, chunk of P positions), two for WG on
    a packed build (its lanes share no operand, so half of them take the slices each cycle)."""
    _check_shape(pe)
    if op not in (OP_FP, OP_EB, OP_WG, OP_UPD):
        raise ValueError(f"op={op!r} is not 0 (FP), 1 (EB), 2 (WG) or 3 (UPD)")
    if not 0 <= nnz <= pe.block_rows * pe.block_cols:
        raise ValueError(f"nnz={nnz} is outside 0..{pe.block_rows * pe.block_cols}")
    if op == OP_UPD:
        return 0
    per_step = 2 if op == OP_WG and pe.packed else 1
    return per_step * nnz * pe.kernel ** 2 * -(-pe.out_h * pe.out_w // pe.parallel)


def _in_tile(pe: PeShape, stride: int) -> tuple[int, int]:
    """The input tile (positions) of a transaction at ``stride``."""
    return stride * (pe.out_h - 1) + pe.kernel, stride * (pe.out_w - 1) + pe.kernel


def result_words(pe: PeShape, *, op: int, nnz: int, stride: int = 1) -> int:
    """Result words after a status-0 word (docs/csb.md, the order given for each op)."""
    k = pe.kernel
    if op == OP_FP:
        return pe.block_rows * pe.out_h * pe.out_w * pe.batch
    if op == OP_EB:
        in_h, in_w = _in_tile(pe, stride)
        return pe.block_cols * in_h * in_w * pe.batch
    return nnz * k * k


def _refused(pe: PeShape, header: int) -> bool:
    """Whether the header alone is refused (status 1 or 2: the PE answers the header with its status), for any
    state the transaction before left (a ``CARRY`` is judged by its length, :func:`transaction_cycles`)."""
    op, shift, nnz, flags = header & 3, (header >> 8) & 0x1F, (header >> 16) & 0x1FF, header & 0xFC
    if header & RESERVED_MASK:
        return True
    if header & FLAG_S2 and (flags & FLAG_EW or op == OP_UPD or getattr(pe, "max_stride", 1) < 2):
        return True
    if header & FLAG_K1 and flags & FLAG_EW:
        return True
    if flags & FLAG_EW:
        elements = min(pe.block_rows * pe.block_cols * pe.kernel ** 2, 0x1FF)
        if op == OP_LOSS:
            most = min(elements // pe.batch, LOSS_MAX_CLASSES)
            return not getattr(pe, "loss", False) or flags != FLAG_EW or nnz == 0 or nnz > most
        held_sums = flags == FLAG_EW | FLAG_CARRY and op == 0  # SELECT on the held sums
        return (flags != FLAG_EW and not held_sums) or bool(shift and op != 1) or nnz > elements
    return bool((shift and op != OP_UPD) or (flags & FLAG_ZERO and op == OP_UPD)
                or (flags & FLAG_G_FIRST and op != OP_WG) or (flags & FLAG_LEFT and op != OP_UPD)
                or (flags & (FLAG_HOLD | FLAG_CARRY) and op == OP_UPD)
                or (flags & FLAG_CARRY and flags & (FLAG_ZERO | FLAG_G_FIRST))
                or nnz > pe.block_rows * pe.block_cols)


def zero_words(pe: PeShape, *, op: int, nnz: int, stride: int = 1) -> int:
    """Cycles the PE spends writing a ``ZERO`` transaction's initial section: FP and EB a result-buffer word (all
    banks and lanes) a cycle, WG a beat of gradient words (one a part) a cycle. A row of the EB grid at stride ``s``
    takes ``s * ceil(ceil(W / s) / P)`` words (docs/csb.md, "Stride 2": its columns of one parity share a bank)."""
    if op == OP_FP:
        return pe.block_rows * pe.out_h * -(-pe.out_w // pe.parallel)
    if op == OP_EB:
        in_h, in_w = _in_tile(pe, stride)
        columns_of_a_parity = -(-in_w // stride)
        return pe.block_cols * in_h * stride * -(-columns_of_a_parity // pe.parallel)
    return -(-result_words(pe, op=op, nnz=nnz) // pe.parts)


def stream_cycles(spec: PeShape, words_in) -> int:
    """Total cycles of the transaction ``words_in`` (the PE registry's cycle-model entry)."""
    return transaction_cycles(spec, words_in).total


def transaction_cycles(pe: PeShape, words_in) -> TransactionCycles:
    """Cycles of the transaction whose input words are ``words_in`` (the status follows from the words); under
    ``K1`` those of ``pe`` built with kernel 1 (``CsbSpec.run_as``). On a wide stream ``words_in`` are the parts
    of its beats: a beat moves a cycle, and the results go ``pe.parts`` to a beat."""
    _check_shape(pe)
    words, parts = [int(w) for w in words_in], pe.parts
    if not words or len(words) % parts:
        raise ValueError(f"a transaction is whole beats of {parts} parts, at least its header, got {len(words)}")
    beats, header = len(words) // parts, words[0]
    op, nnz = header & 3, (header >> 16) & 0x1FF
    if _refused(pe, header) or any(words[1:parts]) or (header & FLAG_CARRY and beats == 1):
        return TransactionCycles(load=beats, compute=0, drain=2)  # header, status only (an accepted CARRY has more)
    if header & FLAG_EW and op == OP_LOSS:
        return loss_cycles(pe, words, beats, nnz)
    if header & FLAG_EW:
        return TransactionCycles(load=beats, compute=0, drain=2)  # the last section streamed through
    if header & FLAG_K1:
        pe = pe.run_as(kernel_one=True)
    index_words = words[parts:parts + _words(nnz)]
    index = [(word >> (8 * j)) & 0xFF for word in index_words for j in range(4)][:nnz]
    if len(index) < nnz:
        raise ValueError(f"the transaction ends inside its index ({len(words)} words, nnz={nnz})")
    stride = 2 if header & FLAG_S2 else 1
    zeros = zero_words(pe, op=op, nnz=nnz, stride=stride) if header & FLAG_ZERO else 0
    if any(byte >> 4 >= pe.block_rows or byte & 15 >= pe.block_cols for byte in index):
        return TransactionCycles(load=beats + zeros, compute=0, drain=2)
    results = 0 if header & FLAG_HOLD else -(-result_words(pe, op=op, nnz=nnz, stride=stride) // parts)
    return TransactionCycles(load=beats + zeros, compute=compute_cycles(pe, op=op, nnz=nnz), drain=2 + results)


def loss_cycles(pe: PeShape, words: list, beats: int, classes: int) -> TransactionCycles:
    """An accepted LOSS (rtl/csb/csb_loss.v): the load; two passes of ``n = classes * batch`` elements a cycle
    each (E, then O, each 2 more to fill its pipeline) with the divider's Qn (49 cycles), each lane's r (33
    cycles) and the status's load between them; the last code given (``drain`` = the status load and the last
    handshake). A ``P`` or label the PE refuses: the status alone after the load."""
    parts, lanes = pe.parts, pe.batch
    param, labels = words[parts], words[2 * parts:2 * parts + lanes]
    batch = param >> 16 & 0xFFF
    bad_label = any(y >= classes and y != LOSS_NO_SAMPLE for y in labels)
    if param & ~LOSS_PARAM_FIELDS or param & 0x3F > 48 or batch == 0 or bad_label:
        return TransactionCycles(load=beats, compute=0, drain=2)
    elements = classes * lanes
    compute = 2 * (elements + 2) + LOSS_QUOTIENT_CYCLES + LOSS_LANE_CYCLES * lanes
    return TransactionCycles(load=beats, compute=compute, drain=2)
