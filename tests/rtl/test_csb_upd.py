"""csb_upd (UPD, and UPD with LEFT) on its own: under Icarus against the plain reference's update
(codesign.pe.csb.reference) on directed vectors (every shift with ties either way, half +- 1, both saturations,
the operands' extremes, LEFT's fit boundary) and 100,000 random ones; a copy that rounds ties up, and one whose
LEFT misses a negative overflow, are caught. Yosys proves the module equal to the plain 64-bit form for every
input (2^62 of them), and finds the tie-rounding copy different."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from codesign.pe.csb.reference import _update

RTL = Path(__file__).resolve().parents[2] / "rtl" / "csb" / "csb_upd.v"
HERE = Path(__file__).resolve().parent
needs_iverilog = pytest.mark.skipif(shutil.which("iverilog") is None, reason="Icarus Verilog (iverilog) is not on PATH")
needs_yosys = pytest.mark.skipif(shutil.which("yosys") is None, reason="Yosys is not on PATH")
TIES_UP = ("(rem > half)", "(rem >= half)")
LEFT_NEG = ("(g_top == 32'sd0) || (g_top == -32'sd1)", "(g_top == 32'sd0) || g_top[31]")


def _directed() -> list[tuple[int, int, int, bool]]:
    """(buffer, gradient, shift, left) at the rule's edges."""
    out = []
    ends = (0, 1, -1, 2 ** 23 - 1, -2 ** 23, 12345, -54321)
    grads = (0, 1, -1, 2 ** 31 - 1, -2 ** 31, 2 ** 30, -2 ** 30 - 1)
    for s in range(32):
        for left in (False, True):
            out += [(b, g, s, left) for b in ends for g in grads]
            if s:  # -g's remainder at, just under and just over half, for an even and an odd floor
                for k in (0, 1, -1, 2, -2, 1000, -1001):
                    for extra in (-1, 0, 1):
                        g = -(k * 2 ** s + 2 ** (s - 1) + extra)
                        if -2 ** 31 <= g < 2 ** 31:
                            out += [(b, g, s, left) for b in (0, 1, -7, 2 ** 23 - 1)]
            edge = 2 ** (31 - s)  # LEFT: the largest gradients that still fit 32 bits, and the next
            out += [(5, g, s, True) for g in (edge - 1, edge, -edge, -edge - 1) if -2 ** 31 <= g < 2 ** 31]
    return out


def _vectors(seed: int = 0, count: int = 100_000) -> list[tuple[int, int, int, bool]]:
    rng = np.random.default_rng(seed)
    b = rng.integers(-2 ** 23, 2 ** 23, count)
    wide = rng.integers(-2 ** 31, 2 ** 31, count)
    small = rng.integers(-2 ** 12, 2 ** 12, count) << rng.integers(0, 20, count)
    g = np.where(rng.random(count) < 0.5, wide, small)
    s, left = rng.integers(0, 32, count), rng.random(count) < 0.3
    return _directed() + [(int(x), int(y), int(z), bool(w)) for x, y, z, w in zip(b, g, s, left)]


def _run(tmp_path: Path, source: Path, vectors) -> int:
    """Vectors whose RTL word differs from the reference's."""
    lines = [f"{int(left) << 61 | s << 56 | (g & 0xFFFF_FFFF) << 24 | (b & 0xFF_FFFF):016x}"
             for b, g, s, left in vectors]
    (tmp_path / "vectors.hex").write_text("\n".join(lines) + "\n")
    binary = tmp_path / f"{source.parent.name}.vvp"
    subprocess.run(["iverilog", "-g2005", "-o", str(binary), "-s", "csb_upd_check", str(HERE / "csb_upd_check.v"),
                    str(source)], check=True, capture_output=True, text=True)
    done = subprocess.run(["vvp", "-n", str(binary), f"+vectors={tmp_path / 'vectors.hex'}", f"+n={len(vectors)}"],
                          check=True, capture_output=True, text=True, timeout=300)
    got = [int(word, 16) for word in done.stdout.split()[:len(vectors)]]
    assert len(got) == len(vectors)
    want = [_update(s, [b], [g], left)[0] & 0xFF_FFFF for b, g, s, left in vectors]
    return sum(x != y for x, y in zip(got, want))


def _mutant(tmp_path: Path, name: str, change: tuple[str, str]) -> Path:
    source = RTL.read_text()
    assert source.count(change[0]) == 1
    path = tmp_path / name / "csb_upd.v"
    path.parent.mkdir()
    path.write_text(source.replace(*change))
    return path


@needs_iverilog
def test_the_update_equals_the_reference_s_on_directed_and_random_vectors(tmp_path):
    vectors = _vectors()
    assert len(vectors) > 108_000 and _run(tmp_path, RTL, vectors) == 0
    edges = _directed()
    assert _run(tmp_path, _mutant(tmp_path, "ties_up", TIES_UP), edges) > 0
    assert _run(tmp_path, _mutant(tmp_path, "left_neg", LEFT_NEG), edges) > 0


def _prove(tmp_path: Path, source: Path) -> subprocess.CompletedProcess:
    script = tmp_path / f"{source.parent.name}.ys"
    script.write_text("\n".join([
        f"read_verilog {source}", f"read_verilog {HERE / 'csb_upd_plain.v'}", "proc", "opt_clean",
        "miter -equiv -flatten -make_outputs csb_upd csb_upd_plain miter", "hierarchy -top miter",
        "sat -verify -prove trigger 0 miter"]) + "\n")
    return subprocess.run(["yosys", "-q", "-s", str(script)], capture_output=True, text=True, timeout=300)


@needs_yosys
def test_yosys_proves_the_update_equal_to_the_plain_64_bit_form(tmp_path):
    assert _prove(tmp_path, RTL).returncode == 0
    failed = _prove(tmp_path, _mutant(tmp_path, "ties_up", TIES_UP))
    assert failed.returncode != 0 and "proof did fail" in failed.stdout + failed.stderr
