"""How the host lays a TT layer step's inputs into the arena the call lists read: the cores in each PE's
``B`` layout, the host's input rows packed in 16-bit slots, and where each core code's slots lie
(:mod:`codesign.step.tt.step_lists` builds the lists over them)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Dict, Sequence, Tuple

import numpy as np

from codesign.contracts.calls import ArenaLayout
from codesign.pe.tt.contract import pack_rows, row_words
from codesign.step.tt.list_tiles import SLOT_BITS, Rows, chunk32


def core_forward(core: np.ndarray) -> np.ndarray:
    """PE2's ``B`` of a forward contraction: ``(m c, a n)``."""
    a, m, n, c = core.shape
    return core.transpose(1, 3, 0, 2).reshape(m * c, a * n)


def core_last_forward(core: np.ndarray) -> np.ndarray:
    """PE1's ``B`` of the last forward contraction: ``(m, a n)`` (``J = 1``)."""
    a, m, n, _ = core.shape
    return core[..., 0].transpose(1, 0, 2).reshape(m, a * n)


def core_input_grad(core: np.ndarray) -> np.ndarray:
    """PE2's ``B`` of an input-gradient contraction: ``(a n, m c)``."""
    a, m, n, c = core.shape
    return core.transpose(0, 2, 1, 3).reshape(a * n, m * c)


def core_last_input_grad(core: np.ndarray) -> np.ndarray:
    """PE1's ``B`` of the last core's input gradient: ``(a n, m)`` (``J = 1``)."""
    a, m, n, _ = core.shape
    return core[..., 0].transpose(0, 2, 1).reshape(a * n, m)


@dataclass(frozen=True)
class HostInput:
    """A tensor the host writes: where (``rows``, ``words`` 32-bit words in all), from which input (``"x"``,
    ``"gy"`` or a core's index), laid out by ``layout`` (values -> 2-D rows)."""

    rows: Rows
    source: object
    layout: Callable[[np.ndarray], np.ndarray]
    words: int


def write_rows(arena: np.ndarray, item: HostInput, laid: np.ndarray, lanes: int) -> None:
    """Codes ``laid`` (rows, K) into ``item``'s rows of the arena, 16-bit slot by slot in place: the words
    :func:`~codesign.pe.tt.contract.pack_rows` makes of them (two's complement modulo 2^16, padding lanes and a
    chunk's unused slots 0), without packing them apart first. Codes may come as floats, whole numbers within
    16-bit codes' range (as the host rounds them: no cast to an integer type on the way)."""
    rows, chunk_slots = item.words // item.rows.words, 2 * item.rows.chunk
    values, full = item.rows.values, item.rows.values // lanes
    start = item.rows.offset // 2
    signed = np.issubdtype(laid.dtype, np.floating)  # a float converts to a signed slot exactly, not to uint16
    slots = arena.view("<i2" if signed else "<u2")[start:start + 2 * item.words].reshape(rows, -1, chunk_slots)
    laid = laid.reshape(rows, values)
    if full:
        np.copyto(slots[:, :full, :lanes], laid[:, :full * lanes].reshape(rows, full, lanes), casting="unsafe")
    if chunk_slots > lanes:
        slots[:, :full, lanes:] = 0
    if values % lanes:  # the last chunk's padding lanes and unused slots
        np.copyto(slots[:, full, :values % lanes], laid[:, full * lanes:], casting="unsafe")
        slots[:, full, values % lanes:] = 0


def flat_cores(cores: Sequence[np.ndarray]) -> np.ndarray:
    """Every core's values (or codes) flattened, core after core: the order of :meth:`StepLists.write`'s
    ``core_codes``."""
    return np.concatenate([np.ravel(core) for core in cores])


def core_slots(inputs: Dict[str, HostInput], shapes: Sequence[Tuple[int, ...]], lanes: int, parts: int
               ) -> Tuple[np.ndarray, np.ndarray]:
    """:attr:`StepLists.core_slots` of the core layouts among ``inputs``: each layout packed as the host packs
    it (:func:`~codesign.pe.tt.contract.pack_rows`), once, over the codes' positions instead of their values
    (1 + the index, in two 16-bit halves), so that a slot's number is where its code comes from."""
    starts = np.cumsum([1, *(math.prod(shape) for shape in shapes)])
    dst, src = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for item in inputs.values():
        if isinstance(item.source, str):
            continue
        shape = shapes[item.source]
        where = item.layout(np.arange(starts[item.source], starts[item.source + 1], dtype=np.int64).reshape(shape))
        halves = [pack_rows(half, lanes, SLOT_BITS, stream_bits=32 * parts).view("<u2").astype(np.int64)
                  for half in (where & 0xFFFF, where >> 16)]
        src.append(halves[0] | halves[1] << 16)
        dst.append(2 * (item.rows.offset // 4) + np.arange(src[-1].size))
    return np.concatenate(dst), np.concatenate(src)


def put_rows(arena: ArenaLayout, values: np.ndarray, lanes: int, parts: int, i_step: int, j_step: int) -> Rows:
    """Host codes ``values`` (..., K) packed as rows of the PEs' 16-bit slots on streams of ``parts`` words."""
    k = values.shape[-1]
    return Rows(offset=arena.put(pack_rows(values.reshape(-1, k), lanes, SLOT_BITS, stream_bits=32 * parts)),
                values=k, words=row_words(k, lanes, SLOT_BITS, 32 * parts) * parts, i_step=i_step, j_step=j_step,
                chunk=chunk32(lanes, parts))


def room_rows(arena: ArenaLayout, rows: int, values: int, lanes: int, parts: int, i_step: int, j_step: int) -> Rows:
    """Room for ``rows`` rows of ``values`` codes in 16-bit slots on streams of ``parts`` words, which a call or
    the host writes later."""
    words = row_words(values, lanes, SLOT_BITS, 32 * parts) * parts
    return Rows(offset=arena.reserve(rows * words), values=values, words=words, i_step=i_step, j_step=j_step,
                chunk=chunk32(lanes, parts))


__all__ = ["HostInput", "core_forward", "core_input_grad", "core_last_forward", "core_last_input_grad", "core_slots",
           "flat_cores", "put_rows", "room_rows", "write_rows"]
