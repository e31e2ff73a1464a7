"""Call lists: the descriptors the accelerator shell runs back to back, and the record it leaves per call.

A call list lets the PL carry a run of PE calls with one start and one done.
The host writes the list once into DDR (:data:`DESCRIPTOR_WORDS` 32-bit words
per call), points the shell's ``calls`` register at it, writes ``n_calls`` and
starts the IP; the shell then, for each call in turn,

1. fetches the descriptor through the read port;
2. streams the PE one transaction: the descriptor's header word, then the
   rows of up to three operand *segments* read from DDR where they lie (each a
   3-D block: ``planes`` planes ``plane_stride`` bytes apart, each of
   ``rows`` rows of ``words`` 32-bit words, ``stride`` bytes apart);
3. takes the PE's status word, then ``count`` result words, passes them raw or
   through the rounding stage (``docs/accelerator.md``, "Rounding stage") and
   writes them as the ``out`` block (3-D, as a segment). An *accumulating*
   call adds its results into the shell's buffer of :data:`ACC_DEPTH`
   :data:`~codesign.numerics.round_stage.HELD_BITS`-bit sums instead
   (``acc_hold``: keep them there; ``acc_add``: add to what an earlier call
   held), so a contraction longer than a PE's buffers is summed across calls
   on the PL; the call that adds without holding drains the sums through the
   rounding stage (or raw, as 64-bit words);
4. writes the call's :data:`RECORD_WORDS`-word record (status, the rounding
   stage's statistics, words moved, a done mark).

Every address in a descriptor is a byte offset into one *arena*: the shell's
``in`` register holds the arena's base for reads and ``out`` for writes (the
host sets both to the same buffer), so a call reads what an earlier call
wrote, where it wrote it. The list is the only thing read at an absolute
address (``calls``).

A call whose status is not 0 ends the list after its input is sent: its
record holds the status and the shell raises ap_done. The PE was refused a
transaction whose remaining words it may have taken as new headers, so the
IP must be reset (reload the overlay) before it runs again. The list
builders check each call's header and result count against the PE's golden
model (:func:`codesign.shell.calls.run_list_golden` refuses a count the PE
does not give), and the driver reads the last record and raises when a list
stopped early. The board imports this module: numpy and the standard library
only.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from codesign.numerics.round_stage import RoundStageConfig

DESCRIPTOR_WORDS = 32  # 128 bytes: one burst of 8 beats at 128 bits; words 30 and 31 are reserved (0)
DESCRIPTOR_BYTES = 4 * DESCRIPTOR_WORDS
RECORD_WORDS = 8
RECORD_DONE = 0x0D0E_CA11  # word 7 of a record: the shell wrote it (the host may clear records beforehand)
FLAG_HEADER = 1 << 0  # send word 1 to the PE first
FLAG_ROUND = 1 << 1  # results through the rounding stage (else 32-bit words as the PE gave them)
FLAG_ACC_ADD = 1 << 2  # add the results to the sums an earlier call held (docs/accelerator.md, "Accumulating calls")
FLAG_ACC_HOLD = 1 << 3  # keep the (summed) results in the buffer; nothing is written but the record
FLAGS = FLAG_HEADER | FLAG_ROUND | FLAG_ACC_ADD | FLAG_ACC_HOLD
ACC_DEPTH = 4096  # sums the shell's accumulation buffer holds (48 bits each: 24 KiB of block RAM)
MAX_CHAIN = 1 << 16  # calls one chain of sums may take: 2^16 results of |x| <= 2^31 keep every sum within 48 bits
ROUND_RESERVED = (1 << 7) | (0x7 << 13) | (0x7 << 21)  # bits of word 15 between its fields (must be 0)
MAX_SEGMENTS = 3  # a CSB conv call reads index, a halo tile and a second tile (WG's DY, EB's initial sums)
MAX_CALLS = (1 << 16) - 1  # a list's calls (the shell counts them in 32 bits; this bounds a list at 8 MiB)

# word index of each descriptor field
FIELD = {"flags": 0, "header": 1, "seg0": 2, "seg1": 6, "out": 10, "count": 14, "round": 15, "row_values": 16,
         "record": 17, "seg0_planes": 18, "seg1_planes": 20, "out_planes": 22, "seg2": 24,
         "seg2_planes": 28}  # planes: (count, stride in bytes)
FIRST_RESERVED = 30
# word index of each record field
RECORD = {"status": 0, "saturated": 1, "sum_abs_lo": 2, "sum_abs_hi": 3, "reserved": 4, "words_in": 5,
          "words_out": 6, "done": 7}


class CallListError(ValueError):
    """A call list the shell cannot run as written (nothing was written to the device)."""


@dataclass(frozen=True)
class Block:
    """A 3-D block of 32-bit words in the arena: ``planes`` planes ``plane_stride`` bytes apart, each ``rows`` rows
    of ``words`` words, ``stride`` bytes apart, the first at byte ``offset``; the shell moves them plane by plane,
    row by row. ``rows`` 0 is an empty block (a segment left unused). Rows of a plane, and planes, must not
    overlap (planes may lie one after the other, or interleaved: row ``r`` of every plane before row ``r + 1``).
    Blocks are kept in a canonical form: rows back to back are one row, planes back to back one plane,
    and a plane of one row is a row (so ``planes`` > 1 only where a plane is a strided 2-D block)."""

    offset: int = 0
    words: int = 0
    rows: int = 0
    stride: int = 0
    planes: int = 1
    plane_stride: int = 0

    def __post_init__(self) -> None:
        for name in ("offset", "words", "rows", "stride", "planes", "plane_stride"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value < 1 << 32:
                raise CallListError(f"block {name}={value!r} must be an integer in [0, 2^32)")
            object.__setattr__(self, name, int(value))
        if self.offset % 4 or self.stride % 4 or self.plane_stride % 4:
            raise CallListError(f"block offset {self.offset}, stride {self.stride} and plane stride "
                                f"{self.plane_stride} must be multiples of 4 bytes")
        if self.planes < 1:
            raise CallListError("a block has at least one plane")
        if self.rows > 1 and self.stride < 4 * self.words:
            raise CallListError(f"block rows overlap: stride {self.stride} B < {self.words} words of a row")
        if not self.rows or not self.words:
            object.__setattr__(self, "planes", 1)
            object.__setattr__(self, "plane_stride", 0)
            return
        if self.planes > 1 and self.plane_stride < (self.rows - 1) * self.stride + 4 * self.words and not (
                self.plane_stride >= 4 * self.words and self.stride >= (self.planes - 1) * self.plane_stride
                + 4 * self.words):  # planes after one another, or interleaved (a row of every plane, then the next)
            raise CallListError(f"block planes overlap: plane stride {self.plane_stride} B, row stride "
                                f"{self.stride} B")
        if self.rows > 1 and self.stride == 4 * self.words:  # rows back to back: one row
            self._set(words=self.words * self.rows, rows=1)
        if self.planes > 1 and self.rows == 1:
            if self.plane_stride == 4 * self.words:  # one-row planes back to back: one row
                self._set(words=self.words * self.planes, planes=1, plane_stride=0)
            else:  # one-row planes: rows of a 2-D block
                self._set(rows=self.planes, stride=self.plane_stride, planes=1, plane_stride=0)
        elif self.planes > 1 and self.plane_stride == self.rows * self.stride:  # planes back to back: rows
            self._set(rows=self.rows * self.planes, planes=1, plane_stride=0)
        if self.planes == 1:
            object.__setattr__(self, "plane_stride", 0)

    def _set(self, **values: int) -> None:
        if values.get("words", self.words) * values.get("rows", self.rows) * values.get("planes", self.planes) \
                >= 1 << 32:
            raise CallListError(f"block of {self.words} x {self.rows} x {self.planes} words exceeds 2^32 words")
        for name, value in values.items():
            object.__setattr__(self, name, value)

    @property
    def total_words(self) -> int:
        return self.words * self.rows * self.planes if self.rows else 0

    @property
    def end(self) -> int:
        """One past the last byte the block touches (its offset when empty)."""
        if not self.total_words:
            return self.offset
        return self.offset + (self.planes - 1) * self.plane_stride + (self.rows - 1) * self.stride + 4 * self.words

    def row_offsets(self) -> np.ndarray:
        """The byte offset of every row, plane by plane."""
        if not self.total_words:
            return np.zeros(0, dtype=np.int64)
        planes = self.plane_stride * np.arange(self.planes, dtype=np.int64)
        return (self.offset + planes[:, None] + self.stride * np.arange(self.rows, dtype=np.int64)).reshape(-1)

    def word_indices(self) -> np.ndarray:
        """The indices of the block's words in the arena (32-bit words), rows in order; none for an empty block."""
        if not self.total_words:
            return np.zeros(0, dtype=np.int64)
        return ((self.row_offsets() // 4)[:, None] + np.arange(self.words)).reshape(-1)

    def overlaps(self, other: "Block") -> bool:
        """Whether a byte of this block is a byte of ``other`` (row by row: rows are byte intervals)."""
        if not self.total_words or not other.total_words or self.end <= other.offset or other.end <= self.offset:
            return False
        mine, theirs = self.row_offsets(), other.row_offsets()
        starts = np.concatenate([mine, theirs])
        ends = np.concatenate([mine + 4 * self.words, theirs + 4 * other.words])
        order = np.argsort(starts, kind="stable")
        # sorted by start, two intervals meet exactly when one starts before the furthest end before it
        return bool(np.any(starts[order][1:] < np.maximum.accumulate(ends[order])[:-1]))

    def as_words(self) -> Tuple[int, int, int, int]:
        return (self.offset, self.words, self.rows, self.stride)

    def plane_words(self) -> Tuple[int, int]:
        """Descriptor words of the planes: (0, 0) for a 2-D block (what a descriptor without planes holds)."""
        return (self.planes, self.plane_stride) if self.planes > 1 else (0, 0)


RAW = RoundStageConfig(enable=False, shift=0, bits=8, lanes=1, group_words=1, row_values=1)


def round_field(cfg: RoundStageConfig) -> int:
    """Descriptor word 15: shift (7-bit two's complement) | bits << 8 | lanes << 16 | group_words << 24 |
    field_bits << 27."""
    return (cfg.shift & 0x7F) | cfg.bits << 8 | cfg.lanes << 16 | cfg.group_words << 24 | cfg.field_bits << 27


@dataclass(frozen=True)
class Call:
    """One PE transaction of a list: its header, up to three operand segments, its result block, how many result
    words the PE gives after its status (``count``), the rounding stage's run over them (:data:`RAW` passes
    them through), and where its record goes (byte offset in the arena).

    ``acc_add``: the results are added to the sums an earlier call of the list held; ``acc_hold``: the (summed)
    results stay in the shell's buffer for a later call, and the out block is empty. A call that adds without
    holding ends its chain: it sends the sums through the rounding stage, or raw as 64-bit words (two words a
    result, low first)."""

    header: Optional[int]
    segments: Tuple[Block, ...]
    out: Block
    count: int
    record: int
    rounding: RoundStageConfig = RAW
    acc_add: bool = False
    acc_hold: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.acc_add, bool) or not isinstance(self.acc_hold, bool):
            raise CallListError("acc_add and acc_hold must be bools")
        if self.accumulates and not 1 <= self.count <= ACC_DEPTH:
            raise CallListError(f"an accumulating call takes 1..{ACC_DEPTH} results (the buffer), not {self.count}")
        if self.acc_hold and self.rounding.enable:
            raise CallListError("a holding call sends nothing: it cannot round")
        if self.header is not None and not 0 <= self.header < 1 << 32:
            raise CallListError(f"header {self.header!r} is not a 32-bit word")
        if len(self.segments) > MAX_SEGMENTS:
            raise CallListError(f"{len(self.segments)} segments; a call has at most {MAX_SEGMENTS}")
        if not 0 <= self.count < 1 << 32 or self.record % 4 or not 0 <= self.record <= (1 << 32) - 4 * RECORD_WORDS:
            raise CallListError(f"count {self.count} or record offset {self.record} out of range")
        try:
            expected = self.rounding.words_out(self.count)
        except ValueError as error:
            raise CallListError(f"rounding: {error}") from None
        if self.acc_hold:
            expected = 0
        elif self.acc_add and not self.rounding.enable:
            expected = 2 * self.count  # the drained sums raw: 64-bit words
        if self.out.total_words != expected:
            raise CallListError(f"the out block holds {self.out.total_words} words; {self.count} results "
                                f"{'held' if self.acc_hold else 'rounded' if self.rounding.enable else 'raw'} "
                                f"make {expected}")
        self._check_apart()

    def with_rounding(self, rounding: RoundStageConfig) -> "Call":
        """This call with ``rounding`` in place of its own, which must give the same words: a moved scale changes
        a shift only, so the blocks, count and record stay as checked (a list step re-aims hundreds of calls)."""
        if (rounding.enable != self.rounding.enable
                or rounding.words_out(self.count) != self.rounding.words_out(self.count)):
            raise CallListError(f"rounding {rounding} gives other words than the call's {self.rounding}")
        changed = copy.copy(self)
        object.__setattr__(changed, "rounding", rounding)
        return changed

    def _check_apart(self) -> None:
        """The out block and the record apart from the call's operands and from each other: the shell writes
        results while it still reads the operands, so a result written over an unread operand word is read back
        changed (the golden model reads every operand first)."""
        record = Block(offset=self.record, words=RECORD_WORDS, rows=1)
        for index, segment in enumerate(self.segments):
            if self.out.overlaps(segment) or record.overlaps(segment):
                raise CallListError(f"segment {index} overlaps the call's out block or its record")
        if record.overlaps(self.out):
            raise CallListError("the record overlaps the call's out block")

    @property
    def accumulates(self) -> bool:
        """Whether the call goes through the shell's accumulation buffer (it holds, adds, or both)."""
        return self.acc_add or self.acc_hold

    @property
    def words_in(self) -> int:
        return (self.header is not None) + sum(block.total_words for block in self.segments)

    def descriptor(self) -> np.ndarray:
        words = np.zeros(DESCRIPTOR_WORDS, dtype=np.uint32)
        flags = (FLAG_HEADER if self.header is not None else 0) | (FLAG_ROUND if self.rounding.enable else 0) | \
            (FLAG_ACC_ADD if self.acc_add else 0) | (FLAG_ACC_HOLD if self.acc_hold else 0)
        words[FIELD["flags"]], words[FIELD["header"]] = flags, self.header or 0
        for index, block in enumerate(self.segments):
            start = FIELD[f"seg{index}"]
            words[start:start + 4] = block.as_words()
            words[FIELD[f"seg{index}_planes"]:FIELD[f"seg{index}_planes"] + 2] = block.plane_words()
        words[FIELD["out"]:FIELD["out"] + 4] = self.out.as_words()
        words[FIELD["out_planes"]:FIELD["out_planes"] + 2] = self.out.plane_words()
        words[FIELD["count"]], words[FIELD["record"]] = self.count, self.record
        words[FIELD["round"]], words[FIELD["row_values"]] = round_field(self.rounding), self.rounding.row_values
        return words


class ArenaLayout:
    """Where a list's tensors lie in its arena: word blocks placed one after the other at 64-byte boundaries (a
    cache line, and a whole number of beats at every stream width), then the arena's first image. Unplaced words
    hold ``FILL``, reserved ones ``RESERVED``, so a stray read or write shows in a comparison of the arena."""

    FILL, RESERVED = 0xA5A5_A5A5, 0xDEAD_BEEF
    ALIGN = 64

    def __init__(self) -> None:
        self.parts: List[Tuple[int, np.ndarray]] = []
        self.end = 0  # bytes

    def put(self, words) -> int:
        """Place ``words`` (uint32); returns their byte offset."""
        offset = -(-self.end // self.ALIGN) * self.ALIGN
        self.parts.append((offset, np.asarray(words, dtype=np.uint32).reshape(-1)))
        self.end = offset + 4 * self.parts[-1][1].size
        return offset

    def reserve(self, words: int) -> int:
        """Room for ``words`` words a call writes; returns its byte offset."""
        return self.put(np.full(words, self.RESERVED, dtype=np.uint32))

    def image(self, spare_words: int = 64) -> np.ndarray:
        """The arena before the list: every placed block, ``spare_words`` of filler after the last."""
        image = np.full(self.end // 4 + spare_words, self.FILL, dtype=np.uint32)
        for offset, words in self.parts:
            image[offset // 4:offset // 4 + words.size] = words
        return image


def encode_list(calls: Sequence[Call]) -> np.ndarray:
    """The descriptors of ``calls`` back to back (uint32), as the shell fetches them."""
    if not 1 <= len(calls) <= MAX_CALLS:
        raise CallListError(f"a call list holds 1..{MAX_CALLS} calls, not {len(calls)}")
    return np.concatenate([call.descriptor() for call in calls])


def decode_descriptor(words: np.ndarray) -> Call:
    """The call a descriptor describes (the inverse of :meth:`Call.descriptor`); reserved words must be 0."""
    words = np.asarray(words, dtype=np.uint32)
    if words.shape != (DESCRIPTOR_WORDS,):
        raise CallListError(f"a descriptor is {DESCRIPTOR_WORDS} words, not {words.shape}")
    flags = int(words[FIELD["flags"]])
    if flags & ~FLAGS or np.any(words[FIRST_RESERVED:]) or int(words[FIELD["round"]]) & ROUND_RESERVED \
            or int(words[FIELD["row_values"]]) >> 16:
        raise CallListError(f"descriptor flags {flags:#x}, reserved bits or reserved words set")

    def block(name: str) -> Block:
        planes, plane_stride = (int(w) for w in words[FIELD[f"{name}_planes"]:FIELD[f"{name}_planes"] + 2])
        return Block(*(int(w) for w in words[FIELD[name]:FIELD[name] + 4]), planes=max(planes, 1),
                     plane_stride=plane_stride)

    segments = [block(f"seg{i}") for i in range(MAX_SEGMENTS)]
    while segments and not segments[-1].total_words:
        segments.pop()  # trailing empty segments send nothing (an empty middle one keeps its place)
    field = int(words[FIELD["round"]])
    shift = field & 0x7F
    try:
        rounding = RoundStageConfig(enable=bool(flags & FLAG_ROUND), shift=shift - 128 if shift & 0x40 else shift,
                                    bits=field >> 8 & 0x1F, lanes=field >> 16 & 0x1F, group_words=field >> 24 & 0x7,
                                    row_values=int(words[FIELD["row_values"]]), field_bits=field >> 27)
    except ValueError as error:
        raise CallListError(f"descriptor rounding fields: {error}") from None
    return Call(header=int(words[FIELD["header"]]) if flags & FLAG_HEADER else None,
                segments=tuple(segments), out=block("out"),
                count=int(words[FIELD["count"]]), record=int(words[FIELD["record"]]), rounding=rounding,
                acc_add=bool(flags & FLAG_ACC_ADD), acc_hold=bool(flags & FLAG_ACC_HOLD))


STREAM_BITS = (32, 64, 128)  # stream words a list can run on


def decode_list(words: np.ndarray, n_calls: int) -> list:
    """The first ``n_calls`` calls of a list's descriptor words (as the shell fetches them)."""
    words = np.asarray(words, dtype=np.uint32).reshape(-1)
    if not 1 <= n_calls <= min(MAX_CALLS, words.size // DESCRIPTOR_WORDS):
        raise CallListError(f"n_calls={n_calls} must be 1..{min(MAX_CALLS, words.size // DESCRIPTOR_WORDS)} (the "
                            "descriptors given)")
    return [decode_descriptor(words[c * DESCRIPTOR_WORDS:(c + 1) * DESCRIPTOR_WORDS]) for c in range(n_calls)]


def check_list(calls: Sequence[Call], arena_bytes: int, stream_bits: int = 32, *, held_sums: bool = True) -> None:
    """Every block and record of every call inside an arena of ``arena_bytes``, and, for ``stream_bits``-wide
    stream words, every block beat aligned and of whole beats (the movers move whole beats and ignore an
    address's low bits): refused before anything runs, as the hardware would read or write elsewhere. A shell
    built without the accumulation buffer (``held_sums`` False) takes no accumulating call."""
    if stream_bits not in STREAM_BITS:
        raise CallListError(f"call lists run on {STREAM_BITS}-bit stream words, not {stream_bits}")
    if not held_sums:
        first = next((i for i, call in enumerate(calls) if call.accumulates), None)
        if first is not None:
            raise CallListError(f"call {first} accumulates, but this shell has no accumulation buffer (held_sums "
                                "False): build the IP with it, or split no contraction across calls")
    check_chains(calls)
    beat = stream_bits // 8
    for index, call in enumerate(calls):
        blocks = [("segment", block) for block in call.segments] + [("out", call.out)]
        blocks.append(("record", Block(offset=call.record, words=RECORD_WORDS, rows=1)))
        for name, block in blocks:
            if block.end > arena_bytes:
                raise CallListError(f"call {index}: its {name} block ends at byte {block.end}, past the "
                                    f"{arena_bytes}-byte arena")
            if block.total_words and (block.offset % beat or (block.rows > 1 and block.stride % beat)
                                      or (block.planes > 1 and block.plane_stride % beat)
                                      or (4 * block.words) % beat):
                raise CallListError(f"call {index}: its {name} block (offset {block.offset}, {block.words} words, "
                                    f"stride {block.stride}) is not made of whole {beat}-byte beats")


def check_side_by_side(lists: Sequence[Sequence[Call]], arena_words: int) -> None:
    """Lists that run side by side (a phase: each on its own IP, started together) write no word another of them
    writes (results and records) and read none another writes: the IPs run at once, so no list may wait on, or
    race, another's results. In order on one IP (one list) a call may read what one before it wrote. Every block
    lies within the arena of ``arena_words`` 32-bit words (:func:`check_list` checks it first)."""
    if len(lists) < 2:
        return

    def words(blocks) -> np.ndarray:
        return np.concatenate([np.zeros(0, np.int64)] + [block.word_indices() for block in blocks])
    writer = np.full(arena_words, -1, np.int32)  # per word, the list that writes it
    for index, calls in enumerate(lists):
        written = words([block for call in calls
                         for block in (call.out, Block(offset=call.record, words=RECORD_WORDS, rows=1))])
        others = writer[written]
        clash = (others >= 0) & (others != index)
        if clash.any():
            raise CallListError(f"lists {others[clash][0]} and {index} of a phase both write word {written[clash][0]}")
        writer[written] = index
    for index, calls in enumerate(lists):
        read = words([block for call in calls for block in call.segments])
        others = writer[read]
        raced = (others >= 0) & (others != index)
        if raced.any():
            raise CallListError(f"list {index} reads word {read[raced][0]}, which list {others[raced][0]} of the same "
                                "phase writes: lists side by side race")


def check_chains(calls: Sequence[Call]) -> None:
    """Every chain of accumulating calls whole: a call that adds follows one that held as many results, a chain
    takes at most :data:`MAX_CHAIN` calls, and the list does not end while sums are held (they would be lost)."""
    held, length = None, 0
    for index, call in enumerate(calls):
        if call.acc_add and held != call.count:
            raise CallListError(f"call {index} adds {call.count} results to the buffer, which holds "
                                f"{'nothing' if held is None else f'{held} sums'}")
        if call.acc_hold and not call.acc_add and held is not None:
            raise CallListError(f"call {index} starts a chain while {held} sums are held: they would be lost")
        if call.accumulates:
            length = length + 1 if call.acc_add else 1
            if length > MAX_CHAIN:
                raise CallListError(f"call {index}: a chain of sums takes at most {MAX_CHAIN} calls")
        if call.acc_hold:
            held = call.count
        elif call.acc_add:
            held = None
    if held is not None:
        raise CallListError(f"the list ends holding {held} sums that no call sends")


def decode_record(words: np.ndarray) -> Dict[str, int]:
    """A call's record as named integers (``sum_abs`` joined from its two words)."""
    words = [int(w) for w in np.asarray(words, dtype=np.uint32)[:RECORD_WORDS]]
    record = {name: words[index] for name, index in RECORD.items()}
    record["sum_abs"] = record.pop("sum_abs_lo") | record.pop("sum_abs_hi") << 32
    return record
