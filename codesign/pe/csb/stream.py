"""The CSB PE at word level (docs/csb.md, "The stream interface"): encode, parse and answer one transaction.

A transaction is the 32-bit words the host streams for one block operation:
header, index bytes, then the op's sections (bytes four to a word,
little-endian, each section starting on a new word). :func:`expected_output`
parses input words exactly as the hardware must and answers with the status
word and (status 0) the result words computed by :mod:`codesign.pe.csb.golden`.
Words are ``uint32`` arrays; signed fields are read from their low bits
(higher bits ignored) and results written sign-extended to 32 bits.

Header flags (docs/csb.md, "Flags and element-wise operations"): ``ZERO`` (FP,
EB, WG start every sum at 0 and take no initial accumulator or gradient
section), ``G_FIRST`` (WG takes its initial gradients right after the index),
``LEFT`` (UPD shifts the gradient left, saturating to 32 bits, and updates at
shift 0) and ``EW`` (an element-wise op: SELECT ``v where z > 0 else 0``,
SHR ``v >> s``, or RELU ``v where v > 0 else 0``; the count field counts elements), ``HOLD`` (FP, EB, WG send
the status alone and keep their results in the PE) and ``CARRY`` (FP, EB, WG
take no initial section and start from what the transaction just before held:
the same op, stride and kernel, for WG the same ``nnz``; else status 1; SELECT with ``CARRY``
takes no ``V``: it masks the FP or EB sums held, as many as its elements), ``S2`` (bit 13: FP, EB, WG
step over the input at stride 2, on a PE built with ``max_stride`` 2) and ``K1`` (bit 14: FP, EB, WG and UPD
run as on this PE built with kernel 1, :func:`run_as`). They let a training step
run as call lists with every operand in place (:mod:`codesign.step.csb`);
:class:`CsbSession` is the PE's state from one transaction to the next. A build on a 64- or 128-bit stream
takes the same transactions laid out on beats (:mod:`codesign.pe.csb.beats`, :meth:`CsbSession.answer`).

Statuses: 1 (reserved header bits, a shift with an op other than UPD, flags an
op does not take, ``S2`` on a PE built for stride 1 only, ``S2`` or ``K1`` on an element-wise op, or a ``CARRY``
with nothing of its kind held) and
2 (``nnz`` above the block capacity) answer the header alone: the PE expects a
new header next, so such a transaction *is* its header word. Status 3 (an
index outside the block) consumes the whole transaction and answers the
status alone. :func:`encode_transaction` refuses all three with a ValueError
unless ``check=False`` (stimulus for status 3 only).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Optional, Tuple

import numpy as np

from codesign.contracts.constants import STATUS_BAD_HEADER, STATUS_OK, WORD_BITS, status_code
from codesign.numerics.loss_grad import NO_SAMPLE, LossGradConfig
from codesign.pe.csb import beats, golden, loss
from codesign.pe.csb.format import pack_bytes, unpack_bytes
from codesign.pe.csb.spec import BUFFER_BITS, STRIDES, CsbSpec


class Op(IntEnum):
    FP = 0
    EB = 1
    WG = 2
    UPD = 3


class EwOp(IntEnum):
    """Element-wise ops (header flag ``EW``): SELECT keeps ``v`` where ``z > 0`` (the mask of an error by the
    forward's sign); SHR shifts a 24-bit buffer word right, flooring (its top byte: the 8-bit weight FP and EB
    read); RELU keeps ``v`` where ``v > 0``, SELECT(v, v) from one section (a hidden layer's activation); LOSS
    turns the logits' accumulators into the loss gradient's codes (:mod:`codesign.pe.csb.loss`)."""

    SELECT = 0
    SHR = 1
    RELU = 2
    LOSS = 3


FLAG_ZERO = 1 << 2  # FP, EB, WG: no initial ACC / G section, every sum starts at 0
FLAG_G_FIRST = 1 << 3  # WG: initial G right after the index, before X and DY
FLAG_LEFT = 1 << 4  # UPD: G * 2^s saturated to 32 bits, then the update at shift 0
FLAG_EW = 1 << 5  # element-wise op (EwOp); the nnz field counts elements
FLAG_HOLD = 1 << 6  # FP, EB, WG: the status alone goes out; the results stay in the PE for the next transaction
FLAG_CARRY = 1 << 7  # FP, EB, WG: no initial section; the sums start from the results the PE holds
FLAG_S2 = 1 << 13  # FP, EB, WG at stride 2, on a PE with max_stride 2
FLAG_K1 = 1 << 14  # FP, EB, WG, UPD as on this PE built with kernel 1 (CsbSpec.run_as)
GEOMETRY = FLAG_S2 | FLAG_K1  # the flags that set a transaction's tile and taps
FLAG_BITS = FLAG_ZERO | FLAG_G_FIRST | FLAG_LEFT | FLAG_EW | FLAG_HOLD | FLAG_CARRY | GEOMETRY
STATUS_NNZ, STATUS_INDEX = status_code("csb", "NNZ"), status_code("csb", "INDEX")
HEADER_FIELDS = 0x3 | FLAG_BITS | 0x1F << 8 | 0x1FF << 16  # op [1:0], flags [7:2], shift [12:8], S2 [13], K1 [14],
# nnz [24:16]
MAX_NNZ_FIELD = 0x1FF
WORD_MASK = 0xFFFF_FFFF


def _op(op) -> Op:
    try:
        return Op[op.upper()] if isinstance(op, str) else Op(op)
    except (KeyError, ValueError):
        raise ValueError(f"op={op!r} is not one of FP (0), EB (1), WG (2), UPD (3)") from None


def _flag_bits(*, zero: bool = False, g_first: bool = False, left: bool = False, ew: bool = False,
               hold: bool = False, carry: bool = False, stride: int = 1, k1: bool = False) -> int:
    return (FLAG_ZERO if zero else 0) | (FLAG_G_FIRST if g_first else 0) | (FLAG_LEFT if left else 0) | \
        (FLAG_EW if ew else 0) | (FLAG_HOLD if hold else 0) | (FLAG_CARRY if carry else 0) | stride_flag(stride) | \
        (FLAG_K1 if k1 else 0)


def stride_flag(stride: int) -> int:
    """The header flag bits of ``stride`` (1 or 2): ``FLAG_S2`` at 2."""
    if isinstance(stride, bool) or stride not in STRIDES:
        raise ValueError(f"stride={stride!r} is not 1 or 2")
    return FLAG_S2 if stride == 2 else 0


def stride_of(flags: int) -> int:
    """The stride (1 or 2) a header's flag bits ask for."""
    return 2 if flags & FLAG_S2 else 1


def run_as(spec: CsbSpec, flags: int) -> CsbSpec:
    """The PE a transaction with these flag bits runs as: ``spec``, or with ``K1`` ``spec`` at kernel 1."""
    return spec.run_as(kernel_one=bool(flags & FLAG_K1))


def geometry(spec: CsbSpec, flags: int) -> int:
    """The tile and taps of a transaction with these flag bits as ``GEOMETRY`` bits: ``S2``, and ``K1`` where it
    changes something (on a kernel-1 build it does not)."""
    return flags & (GEOMETRY if spec.kernel > 1 else FLAG_S2)


def header_word(op, nnz: int, shift: int = 0, *, zero: bool = False, g_first: bool = False, left: bool = False,
                ew: bool = False, hold: bool = False, carry: bool = False, stride: int = 1, k1: bool = False) -> int:
    """The header word; fields are range-checked, the status rules are not (see :func:`header_status`).
    With ``ew`` the op is an :class:`EwOp` and ``nnz`` the element count."""
    op = int(EwOp(op)) if ew else int(_op(op))
    if isinstance(nnz, bool) or not isinstance(nnz, (int, np.integer)) or not 0 <= nnz <= MAX_NNZ_FIELD:
        raise ValueError(f"nnz={nnz!r} does not fit the 9-bit header field")
    if isinstance(shift, bool) or not isinstance(shift, (int, np.integer)) or not 0 <= shift <= golden.MAX_SHIFT:
        raise ValueError(f"shift={shift!r} does not fit the 5-bit header field")
    return op | _flag_bits(zero=zero, g_first=g_first, left=left, ew=ew, hold=hold, carry=carry, stride=stride,
                           k1=k1) | int(shift) << 8 | int(nnz) << 16


Held = Tuple[int, int, int]  # (op, nnz, GEOMETRY bits) of the transaction whose results the PE holds (FLAG_HOLD)


def chain_held(spec: CsbSpec, header: int) -> Optional[Held]:
    """What the transaction before a ``CARRY`` header must have held for it to be accepted (a list's chains hold
    it; ``None`` for a header without ``CARRY``): the same op, ``nnz``, stride and kernel, or for SELECT an FP or
    EB whose sums are as many as its elements."""
    op, nnz, flags = header & 3, header >> 16 & 0x1FF, header & FLAG_BITS
    if not flags & FLAG_CARRY:
        return None
    if flags & FLAG_EW:
        candidates = (0, FLAG_K1, FLAG_S2, FLAG_S2 | FLAG_K1)[:2 * spec.max_stride]
        for bits in dict.fromkeys(geometry(spec, bits) for bits in candidates):  # in order, each once
            if nnz == result_count(spec, Op.EB, 0, bits):
                return (Op.EB, 0, bits)
        return (Op.FP, 0, 0)
    return (op, nnz, geometry(spec, flags))


def header_status(spec: CsbSpec, header: int, held: Optional[Held] = None) -> int:
    """0 when the header is accepted, else status 1 or 2 (the PE then reads nothing more). ``held``: what the
    transaction before left in the PE (``None``: nothing); ``CARRY`` needs the same op at the same stride and
    kernel (and for WG the same ``nnz``) held."""
    op, shift, nnz, flags = header & 3, header >> 8 & 0x1F, header >> 16 & 0x1FF, header & FLAG_BITS
    if header & ~HEADER_FIELDS & WORD_MASK:
        return STATUS_BAD_HEADER
    if flags & FLAG_EW:
        carry = flags == FLAG_EW | FLAG_CARRY and op == EwOp.SELECT
        if (flags != FLAG_EW and not carry) or (shift and op not in (EwOp.SHR, EwOp.LOSS)) or \
                (op == EwOp.LOSS and nnz == 0):
            return STATUS_BAD_HEADER
        if op == EwOp.LOSS:
            if not spec.loss:
                return STATUS_BAD_HEADER  # a build without the LOSS unit
            return STATUS_NNZ if nnz > loss.max_classes(spec) else STATUS_OK
        if carry and (held is None or held[0] not in (Op.FP, Op.EB)
                      or nnz != result_count(spec, held[0], held[1], held[2])):
            return STATUS_BAD_HEADER
        return STATUS_NNZ if nnz > spec.ew_capacity else STATUS_OK
    if (shift and op != Op.UPD) or (flags & FLAG_ZERO and op == Op.UPD) or (flags & FLAG_G_FIRST and op != Op.WG) \
            or (flags & FLAG_LEFT and op != Op.UPD) or (flags & (FLAG_HOLD | FLAG_CARRY) and op == Op.UPD) \
            or (flags & FLAG_S2 and (op == Op.UPD or spec.max_stride < 2)):
        return STATUS_BAD_HEADER
    if flags & FLAG_CARRY and (flags & (FLAG_ZERO | FLAG_G_FIRST) or held is None or held[0] != op
                               or (op == Op.WG and held[1] != nnz) or held[2] != geometry(spec, flags)):
        return STATUS_BAD_HEADER
    if nnz > spec.capacity:
        return STATUS_NNZ
    return STATUS_OK


def sections(spec: CsbSpec, op, nnz: int, flags: int = 0) -> list[tuple[str, str, int]]:
    """``(name, 'bytes' | 'words', count)`` of the sections after the header, in stream order (``flags``: the
    header's flag bits)."""
    if flags & FLAG_EW:
        if EwOp(op) == EwOp.LOSS:  # nnz: the classes
            return [("param", "words", 1), ("labels", "words", spec.batch), ("v", "words", nnz * spec.batch)]
        if EwOp(op) != EwOp.SELECT:
            return [("v", "words", nnz)]
        return ([] if flags & FLAG_CARRY else [("v", "words", nnz)]) + [("z", "words", nnz)]
    spec = run_as(spec, flags)
    op, kk = _op(op), spec.kk
    zero, g_first = bool(flags & (FLAG_ZERO | FLAG_CARRY)), bool(flags & FLAG_G_FIRST)
    x_bytes = spec.block_cols * spec.in_pos_at(stride_of(flags)) * spec.batch
    dy_bytes = spec.block_rows * spec.out_pos * spec.batch
    parts = [("index", "bytes", nnz)]
    if op == Op.FP:
        parts += [("weights", "bytes", nnz * kk), ("x", "bytes", x_bytes)] + \
            ([] if zero else [("acc", "words", dy_bytes)])
    elif op == Op.EB:
        parts += [("weights", "bytes", nnz * kk), ("dy", "bytes", dy_bytes)] + \
            ([] if zero else [("acc", "words", x_bytes)])
    elif op == Op.WG:
        grads = [] if zero else [("grads", "words", nnz * kk)]
        parts += (grads if g_first else []) + [("x", "bytes", x_bytes), ("dy", "bytes", dy_bytes)] + \
            ([] if g_first else grads)
    else:
        parts += [("buffer", "words", nnz * kk), ("grads", "words", nnz * kk)]
    return parts


def _section_words(kind: str, count: int) -> int:
    return -(-count // 4) if kind == "bytes" else count


def transaction_sections(spec: CsbSpec, header: int, held: Optional[Held] = None) -> list[int]:
    """32-bit words of the header (1) and of each section after it, in stream order, of the transaction this
    header starts after one that left ``held`` in the PE (the header alone where it is refused, status 1 or 2)."""
    if header_status(spec, header, held) != STATUS_OK:
        return [1]
    return [1] + [_section_words(kind, count)
                  for _, kind, count in sections(spec, header & 3, header >> 16 & 0x1FF, header & FLAG_BITS)]


def beat_layout(spec: CsbSpec, stream: np.ndarray, held: Optional[Held] = None) -> Optional[list[int]]:
    """:func:`transaction_sections` of the transaction whose beats ``stream`` starts with (its header beat first),
    or None where the header beat's parts above the first are not 0 (status 1: that beat alone)."""
    if not beats.header_beat_clear(stream, spec.parts):
        return None
    return transaction_sections(spec, int(stream[0]), held)


def transaction_length(spec: CsbSpec, header: int, held: Optional[Held] = None) -> int:
    """Input words of the transaction this header starts (1 for a header refused with status 1 or 2) after one
    that left ``held`` in the PE, as 32-bit words (:func:`codesign.pe.csb.beats.padded` gives a wide stream's)."""
    return sum(transaction_sections(spec, header, held))


def result_count(spec: CsbSpec, op, nnz: int, flags: int = 0) -> int:
    """Result words after a status-0 word (``flags``: the header's flag bits; an element-wise op gives one word an
    element, a ``HOLD`` none)."""
    if flags & FLAG_HOLD:
        return 0
    if flags & FLAG_EW:
        return nnz * spec.batch if op == EwOp.LOSS else nnz
    op, spec = _op(op), run_as(spec, flags)
    if op == Op.FP:
        return spec.block_rows * spec.out_pos * spec.batch
    if op == Op.EB:
        return spec.block_cols * spec.in_pos_at(stride_of(flags)) * spec.batch
    return nnz * spec.kk


@dataclass(frozen=True)
class Transaction:
    """One parsed transaction: header fields, status and the sections as int64 arrays in golden's layouts."""

    op: Op
    shift: int
    nnz: int
    status: int
    index: np.ndarray
    data: dict[str, np.ndarray]
    flags: int = 0

    @property
    def ys(self) -> np.ndarray:
        return (self.index >> 4).astype(np.int64)

    @property
    def xs(self) -> np.ndarray:
        return (self.index & 15).astype(np.int64)


def _signed(words: np.ndarray, bits: int) -> np.ndarray:
    """Signed values from the low ``bits`` of each word (higher bits ignored)."""
    low = words.astype(np.int64) & ((1 << bits) - 1)
    return low - ((low >> (bits - 1)) << bits)


def _as_words(words) -> np.ndarray:
    array = np.asarray(words)
    if array.ndim != 1 or (array.dtype.kind not in "iu" and array.size):
        raise ValueError(f"words must be a 1-D integer array, got {array.dtype} {array.shape}")
    if array.size and (int(array.min()) < 0 or int(array.max()) > WORD_MASK):
        raise ValueError("a word is outside 0..2^32-1")
    return array.astype(np.uint32)


def _shapes(spec: CsbSpec, nnz: int, flags: int = 0) -> dict[str, tuple[int, ...]]:
    spec = run_as(spec, flags)
    k, b = spec.kernel, spec.batch
    return {"weights": (nnz, k, k), "x": (spec.block_cols, *spec.in_tile(stride_of(flags)), b),
            "dy": (spec.block_rows, spec.out_h, spec.out_w, b), "grads": (nnz, k, k), "buffer": (nnz, k, k)}


def _field_bits(spec: CsbSpec, op: Op, name: str, flags: int = 0) -> int:
    if flags & FLAG_EW:
        if name in ("param", "labels"):
            return WORD_BITS  # LOSS's P and Y: read as unsigned words
        return BUFFER_BITS if op == EwOp.SHR else spec.acc_bits  # SHR reads buffer words, the others sums
    if name in ("index",):
        return 8
    if name in ("weights", "x", "dy"):
        return spec.data_bits
    if name == "buffer":
        return BUFFER_BITS
    if name == "grads" and op == Op.UPD:
        return WORD_BITS  # UPD gradients are full 32-bit words
    return spec.acc_bits  # accumulators and WG gradients


def parse_transaction(spec: CsbSpec, words, held: Optional[Held] = None,
                      held_values: Optional[np.ndarray] = None) -> Transaction:
    """Read one transaction's input words as the PE does after one that left ``held`` (``held_values``: its
    results, flat in stream order); a ValueError if they are truncated or too long."""
    words = _as_words(words)
    if words.size == 0:
        raise ValueError("transaction truncated: no header word")
    header = int(words[0])
    op, shift, nnz, flags = Op(header & 3), header >> 8 & 0x1F, header >> 16 & 0x1FF, header & FLAG_BITS
    status = header_status(spec, header, held)
    if status != STATUS_OK:
        if words.size != 1:
            raise ValueError(f"header 0x{header:08x} is refused with status {status}: the PE expects a new header "
                             f"next, yet {words.size - 1} more words follow")
        return Transaction(op=op, shift=shift, nnz=nnz, status=status, index=np.zeros(0, np.uint8), data={},
                           flags=flags)
    expected = transaction_length(spec, header, held)
    if words.size < expected:
        raise ValueError(f"transaction truncated: {words.size} words, op {op.name} with nnz={nnz} needs {expected}")
    if words.size > expected:
        raise ValueError(f"transaction has {words.size - expected} words beyond its {expected}")
    shapes = _shapes(spec, nnz, flags)
    acc_shape = shapes["dy"] if op == Op.FP else shapes["x"]
    at, data, index = 1, {}, np.zeros(0, np.uint8)
    if flags & FLAG_EW and flags & FLAG_CARRY:  # SELECT's V: the FP or EB sums the PE holds
        data["v"] = np.asarray(held_values, dtype=np.int64)
    elif flags & (FLAG_ZERO | FLAG_CARRY):  # the sums start at 0, or at the results the PE holds
        initial = np.zeros(acc_shape if op != Op.WG else shapes["grads"], np.int64)
        if flags & FLAG_CARRY:
            initial = np.asarray(held_values, dtype=np.int64).reshape(initial.shape)
        data["acc" if op in (Op.FP, Op.EB) else "grads"] = initial
    for name, kind, count in sections(spec, op, nnz, flags):
        size = _section_words(kind, count)
        chunk = words[at:at + size]
        at += size
        if name == "index":
            index = unpack_bytes(chunk, count)
            continue
        if name in ("param", "labels"):  # LOSS: unsigned fields
            data[name] = chunk.astype(np.int64)
            continue
        values = unpack_bytes(chunk, count).view(np.int8).astype(np.int64) if kind == "bytes" else \
            _signed(chunk, _field_bits(spec, op, name, flags))
        data[name] = values if flags & FLAG_EW else values.reshape(acc_shape if name == "acc" else shapes[name])
    ys, xs = index >> 4, index & 15
    if np.any(ys >= spec.block_rows) or np.any(xs >= spec.block_cols):
        status = STATUS_INDEX
    if flags & FLAG_EW and op == EwOp.LOSS:
        data["param"], data["labels"] = loss.read_param(data["param"][0]), loss.read_labels(data["labels"], nnz)
        if data["param"] is None or data["labels"] is None:
            status = STATUS_INDEX
    return Transaction(op=op, shift=shift, nnz=nnz, status=status, index=index, data=data, flags=flags)


def compute(spec: CsbSpec, transaction: Transaction) -> np.ndarray:
    """The result of an accepted transaction (int64, flat in stream order), from the golden block operations."""
    if transaction.status != STATUS_OK:
        raise ValueError(f"transaction was refused with status {transaction.status}: it has no result")
    d, op, ys, xs = transaction.data, transaction.op, transaction.ys, transaction.xs
    spec = run_as(spec, transaction.flags)
    if transaction.flags & FLAG_EW:
        if op == EwOp.LOSS:
            return loss.compute(spec, transaction.nnz, transaction.shift, d)
        if op != EwOp.SHR:
            return np.where(d["z" if op == EwOp.SELECT else "v"] > 0, d["v"], 0).astype(np.int64)
        return d["v"] >> transaction.shift  # arithmetic: floor
    if op == Op.UPD and transaction.flags & FLAG_LEFT:  # |G| <= 2^31, s <= 31: exact in int64, then 32-bit saturation
        grads = golden.saturate(d["grads"] << transaction.shift, WORD_BITS)
        return golden.block_upd(spec, d["buffer"], grads, 0).reshape(-1)
    stride = stride_of(transaction.flags)
    if op == Op.FP:
        result = golden.block_fp(spec, ys, xs, d["weights"], d["x"], d["acc"], stride=stride)
    elif op == Op.EB:
        result = golden.block_eb(spec, ys, xs, d["weights"], d["dy"], d["acc"], stride=stride)
    elif op == Op.WG:
        result = golden.block_wg(spec, ys, xs, d["x"], d["dy"], d["grads"], stride=stride)
    else:
        result = golden.block_upd(spec, d["buffer"], d["grads"], transaction.shift)
    return result.reshape(-1)


class CsbSession:
    """The PE from one transaction to the next: what a ``HOLD`` left in it, which a ``CARRY`` starts from.

    Every transaction but an accepted ``HOLD`` leaves nothing held, so a stream without ``HOLD`` answers each
    transaction on its own. Why state in the PE: a chain of FP (or EB, WG) calls over one block row otherwise
    streams its 256 sums out and back in between every two calls, twice the words of its operands."""

    def __init__(self, spec: CsbSpec) -> None:
        self.spec = spec
        self.held: Optional[Held] = None
        self.held_values: Optional[np.ndarray] = None

    def answer(self, words) -> np.ndarray:
        """The output words (uint32): status, then the results (none for an accepted ``HOLD``). On a wide stream
        (``spec.parts`` above 1) ``words`` and the answer are the beats' parts (:mod:`codesign.pe.csb.beats`): a
        header beat whose parts above the first are not 0 is refused (status 1), alone."""
        parts = self.spec.parts
        if parts == 1:
            return self._answer(words)
        stream = _as_words(words)
        if stream.size < parts:
            raise ValueError(f"transaction truncated: {stream.size} parts, a header beat has {parts}")
        layout = beat_layout(self.spec, stream, self.held)
        if layout is None:
            if stream.size != parts:
                raise ValueError(f"header beat {stream[:parts].tolist()} is refused with status "
                                 f"{STATUS_BAD_HEADER}: the PE expects a new header next, yet {stream.size - parts} "
                                 "more parts follow")
            self.held, self.held_values = None, None
            return beats.widen_output(np.array([STATUS_BAD_HEADER], np.uint32), parts)
        return beats.widen_output(self._answer(beats.narrow(stream, layout, parts)), parts)

    def _answer(self, words) -> np.ndarray:
        """:meth:`answer` on the transaction's 32-bit words."""
        transaction = parse_transaction(self.spec, words, self.held, self.held_values)
        self.held, self.held_values = None, None
        if transaction.status != STATUS_OK:
            return np.array([transaction.status], dtype=np.uint32)
        result = compute(self.spec, transaction)
        if transaction.flags & FLAG_HOLD:
            self.held = (int(transaction.op), transaction.nnz, geometry(self.spec, transaction.flags))
            self.held_values = result
            return np.array([STATUS_OK], dtype=np.uint32)
        return np.concatenate([[STATUS_OK], result & WORD_MASK]).astype(np.uint32)


def expected_output(spec: CsbSpec, words, session: Optional[CsbSession] = None) -> np.ndarray:
    """The output words (uint32) the PE must send for one transaction's input words: status, then results.
    ``session``: the PE's state between transactions (``None``: a PE that holds nothing)."""
    return (session or CsbSession(spec)).answer(words)


def decode_output(spec: CsbSpec, op, nnz: int, words, flags: int = 0) -> tuple[int, np.ndarray]:
    """``(status, results)`` from output words, results signed int64 in stream order; ValueError on a bad length."""
    words = _as_words(words)
    if words.size == 0:
        raise ValueError("output truncated: no status word")
    status = int(words[0])
    if status not in range(4):
        raise ValueError(f"status word {status} is not 0..3")
    want = 1 + (result_count(spec, op, nnz, flags) if status == STATUS_OK else 0)
    if words.size != want:
        raise ValueError(f"output has {words.size} words, status {status} of op {_op(op).name} with nnz={nnz} "
                         f"needs {want}")
    return status, _signed(words[1:], WORD_BITS)


def split_stream(spec: CsbSpec, words) -> list[np.ndarray]:
    """Cut a continuous input stream into transactions, header by header (what each one leaves held decides the
    next one's length; on a wide stream the parts of its beats); ValueError if the last is truncated."""
    words = _as_words(words)
    out, at, session, parts = [], 0, CsbSession(spec), spec.parts
    while at < words.size:
        layout = beat_layout(spec, words[at:], session.held) or [1]  # a header beat refused: itself alone
        length = sum(beats.padded(count, parts) for count in layout)
        if at + length > words.size:
            raise ValueError(f"stream truncated: the transaction at word {at} needs {length} words, "
                             f"{words.size - at} remain")
        out.append(words[at:at + length])
        session.answer(out[-1])
        at += length
    return out


def encode_elementwise(spec: CsbSpec, op, v, z=None, *, shift: int = 0) -> np.ndarray:
    """Input words of an element-wise transaction: SELECT takes ``v`` and ``z`` (``acc_bits`` values), RELU ``v``
    (``acc_bits`` values), SHR ``v`` (24-bit buffer words) and ``shift``; bad input raises a ValueError."""
    op = EwOp(op)
    v = np.asarray(v).reshape(-1)
    if v.size > spec.ew_capacity:
        raise ValueError(f"{v.size} elements exceed the element-wise capacity {spec.ew_capacity} (status 2)")
    if (z is None) == (op == EwOp.SELECT) or (shift and op != EwOp.SHR):
        takes = {EwOp.SELECT: "v and z", EwOp.SHR: "v and a shift", EwOp.RELU: "v alone"}[op]
        raise ValueError(f"{op.name} takes {takes}")
    bits = _field_bits(spec, op, "v", FLAG_EW)
    words = [np.array([header_word(op, v.size, shift, ew=True)], dtype=np.uint32),
             (golden.check_codes("v", v, bits) & WORD_MASK).astype(np.uint32)]
    if z is not None:
        z = np.asarray(z).reshape(-1)
        if z.shape != v.shape:
            raise ValueError(f"z has {z.size} elements, v {v.size}")
        words.append((golden.check_codes("z", z, bits) & WORD_MASK).astype(np.uint32))
    return np.concatenate(words).astype(np.uint32)


def encode_select_held(spec: CsbSpec, z) -> np.ndarray:
    """Input words of a SELECT with ``CARRY``: ``z`` (``acc_bits`` values), one per FP or EB sum the PE holds,
    which it masks (V is not sent)."""
    z = np.asarray(z).reshape(-1)
    if z.size > spec.ew_capacity:
        raise ValueError(f"{z.size} elements exceed the element-wise capacity {spec.ew_capacity} (status 2)")
    words = golden.check_codes("z", z, spec.acc_bits) & WORD_MASK
    header = header_word(EwOp.SELECT, z.size, ew=True, carry=True)
    return np.concatenate([[header], words]).astype(np.uint32)


def encode_loss(spec: CsbSpec, v, labels, *, exp_shift: int, recip_shift: int, batch: int,
                param: int | None = None, check: bool = True) -> np.ndarray:
    """Input words (uint32, 32-bit words: :func:`codesign.pe.csb.beats.widen` lays them on a wide stream's beats)
    of a LOSS (:mod:`codesign.pe.csb.loss`) on ``v`` (``classes`` x the PE's lanes, ``acc_bits`` values) and each
    lane's label (``NO_SAMPLE``: none); bad input raises a ValueError. ``param``: a raw ``P`` word in place of the
    fields', and ``check=False`` lets labels outside the classes through (stimulus for status 3)."""
    if not spec.loss:
        raise ValueError("this PE is built without the LOSS unit (loss=False): it would answer status 1")
    v = np.asarray(v)
    if v.ndim != 2 or v.shape[1] != spec.batch or not 1 <= v.shape[0] <= loss.max_classes(spec):
        raise ValueError(f"v must be (classes, {spec.batch} lanes) with 1..{loss.max_classes(spec)} classes on this "
                         f"PE, got shape {v.shape}")
    labels = np.asarray(labels)
    if labels.shape != (spec.batch,) or labels.dtype.kind not in "iu":
        raise ValueError(f"labels must be {spec.batch} integers (a lane each), got {labels.dtype} {labels.shape}")
    if check and loss.read_labels(loss.label_words(labels), v.shape[0]) is None:
        raise ValueError(f"labels must lie in 0..{v.shape[0] - 1} or be {NO_SAMPLE} (no sample); "
                         "the PE would answer status 3")
    LossGradConfig(classes=v.shape[0], batch=batch, exp_shift=exp_shift, recip_shift=recip_shift)
    header = header_word(EwOp.LOSS, v.shape[0], exp_shift, ew=True)
    words = golden.check_codes("v", v, spec.acc_bits).reshape(-1) & WORD_MASK
    p = loss.param_word(recip_shift=recip_shift, batch=batch) if param is None else param
    return np.concatenate([[header, p], loss.label_words(labels), words]).astype(np.uint32)


def encode_transaction(spec: CsbSpec, op, *, index=None, weights=None, x=None, dy=None, acc=None, grads=None,
                       buffer=None, shift: int = 0, check: bool = True, zero: bool = False, g_first: bool = False,
                       left: bool = False, hold: bool = False, carry: bool = False, stride: int = 1,
                       k1: bool = False) -> np.ndarray:
    """Input words (uint32) of one transaction from golden-layout arrays; bad input raises a ValueError.

    ``index`` is the ``nnz`` index bytes ``{y, x}`` in stored order. FP needs
    ``weights, x, acc``; EB ``weights, dy, acc``; WG ``x, dy, grads``; UPD
    ``buffer, grads, shift``. ``zero`` (FP, EB, WG) leaves out ``acc``/``grads``,
    ``g_first`` (WG) sends ``grads`` before ``x``, ``left`` (UPD) makes the
    shift a left shift of the gradients, ``hold`` (FP, EB, WG) keeps the results
    in the PE and ``carry`` (FP, EB, WG, without ``zero`` or ``g_first``) starts
    from them, leaving out ``acc``/``grads``; ``stride`` 2 (FP, EB, WG on a PE with ``max_stride`` 2)
    steps over the input at stride 2, and ``k1`` runs FP, EB, WG or UPD as on this PE built with kernel 1 (one
    tap: ``weights``, ``grads`` and ``buffer`` of ``(nnz, 1, 1)``). Values are checked against their field widths
    (8-bit codes, ``acc_bits`` accumulators and WG gradients, 24-bit buffer
    words, 32-bit UPD gradients). With ``check=False`` index bytes outside the
    block are let through (the PE answers status 3); everything else is
    still checked.
    """
    op = _op(op)
    index = np.zeros(0, np.uint8) if index is None else np.asarray(index)
    if index.ndim != 1 or index.dtype.kind not in "iu" or (index.size and (index.min() < 0 or index.max() > 0xFF)):
        raise ValueError("index must be a 1-D array of bytes 0..255")
    nnz = int(index.size)
    if nnz > spec.capacity:
        raise ValueError(f"nnz={nnz} exceeds the block capacity {spec.capacity} (the PE would answer status 2)")
    if shift and op != Op.UPD:
        raise ValueError(f"shift={shift} is only meaningful for UPD, not {op.name} (the PE would answer status 1)")
    flags = _flag_bits(zero=zero, g_first=g_first, left=left, hold=hold, carry=carry, stride=stride, k1=k1)
    if (zero and op == Op.UPD) or (g_first and op != Op.WG) or (left and op != Op.UPD) or \
            ((hold or carry) and op == Op.UPD) or (carry and (zero or g_first)) or (stride == 2 and op == Op.UPD):
        raise ValueError(f"{op.name} does not take the flags zero={zero}, g_first={g_first}, left={left}, "
                         f"hold={hold}, carry={carry}, stride={stride} (the PE would answer status 1)")
    if stride > spec.max_stride:
        raise ValueError(f"stride={stride}: this PE runs strides 1..{spec.max_stride} (the PE would answer status 1)")
    words = [np.array([header_word(op, nnz, shift, zero=zero, g_first=g_first, left=left, hold=hold,
                                   carry=carry, stride=stride, k1=k1)], dtype=np.uint32)]
    if check and (np.any(index >> 4 >= spec.block_rows) or np.any(index & 15 >= spec.block_cols)):
        raise ValueError(f"an index byte lies outside the {spec.block_rows} x {spec.block_cols} block "
                         "(the PE would answer status 3)")
    shapes = _shapes(spec, nnz, flags)
    given = {"weights": weights, "x": x, "dy": dy, "acc": acc, "grads": grads, "buffer": buffer}
    needed = [name for name, _, _ in sections(spec, op, nnz, flags)][1:]
    extra = [name for name, value in given.items() if value is not None and name not in needed]
    if extra:
        raise ValueError(f"{op.name} takes {', '.join(needed)}; got also {', '.join(extra)}")
    words.append(pack_bytes(index))
    for name, kind, count in sections(spec, op, nnz, flags)[1:]:
        value = given[name]
        if value is None:
            raise ValueError(f"{op.name} needs {name}")
        shape = (shapes["dy"] if op == Op.FP else shapes["x"]) if name == "acc" else shapes[name]
        codes = golden.check_codes(name, value, _field_bits(spec, op, name), shape).reshape(-1)
        words.append(pack_bytes(codes) if kind == "bytes" else (codes & WORD_MASK).astype(np.uint32))
    return np.concatenate(words).astype(np.uint32)
