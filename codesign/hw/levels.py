"""What a verification level reports, for any PE: the generic flow (:mod:`codesign.hw.flow`) builds these and
the PE protocol (:mod:`codesign.pe.protocol`) returns them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple


@dataclass(frozen=True)
class LevelResult:
    """Outcome of one verification level: vectors compared bit for bit, how many differed, wall time (s)."""

    level: str
    vectors: int
    mismatches: int
    seconds: float
    detail: str = ""


@dataclass(frozen=True)
class RtlOutcome:
    """What a bench summary says once the PE has interpreted it: results checked and how many differed."""

    vectors: int
    mismatches: int
    first_mismatches: Tuple[str, ...]
    cycles: Tuple[int, ...] = ()  # per transaction (stream PEs), for cycle-model checks
