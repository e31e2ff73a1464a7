"""csb_group_packed on its own under Icarus: FP's and EB's two lanes' products from one 25 x 8 multiplication (a DSP
slice) against the plain products, every (lo, hi) pair of signed 8-bit codes for ten weights (every weight in make
test-slow: all 2^24 triples), and WG's two half-lane cycles on 20,000 random steps (lane sums, the held half and the
saturating partial). The same bench finds wrong words in a copy without the high part's borrow, and in one whose
partial leaves the held half out."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

RTL_DIR = Path(__file__).resolve().parents[2] / "rtl" / "csb"
BENCH = Path(__file__).resolve().parent / "csb_group_packed_check.v"
pytestmark = pytest.mark.skipif(shutil.which("iverilog") is None, reason="Icarus Verilog (iverilog) is not on PATH")
BORROW = " + {15'd0, p[15]};"
HELD = "$signed(held) + $signed(lane_sum)"


def _run(tmp_path: Path, group: Path, *, full: bool) -> tuple[int, int, int, int]:
    """(products checked, triples with a wrong product, WG steps checked, wrong WG words)."""
    binary = tmp_path / f"check_{group.parent.name}.vvp"
    subprocess.run(["iverilog", "-g2005", *(["-DFULL"] if full else []), "-o", str(binary),
                    "-s", "csb_group_packed_check", str(BENCH), str(group), str(RTL_DIR / "csb_sat_add.v")],
                   check=True, capture_output=True, text=True)
    done = subprocess.run(["vvp", "-n", str(binary)], check=True, capture_output=True, text=True, timeout=900)
    return tuple(int(v) for v in done.stdout.split()[:4])


def _broken(tmp_path: Path, name: str, old: str, new: str) -> Path:
    source = (RTL_DIR / "csb_group_packed.v").read_text()
    assert source.count(old) == 1
    path = tmp_path / name / "csb_group_packed.v"
    path.parent.mkdir()
    path.write_text(source.replace(old, new))
    return path


def test_ten_weights_and_wg_halves_against_the_plain_products_and_mutations_are_caught(tmp_path):
    assert _run(tmp_path, RTL_DIR / "csb_group_packed.v", full=False) == (10 * 65536, 0, 20000, 0)
    checked, wrong, wg_checked, wg_wrong = _run(tmp_path, _broken(tmp_path, "no_borrow", BORROW, ";"), full=False)
    assert (checked, wg_checked, wg_wrong) == (10 * 65536, 20000, 0) and wrong > 0
    checked, wrong, wg_checked, wg_wrong = _run(tmp_path, _broken(tmp_path, "no_held", HELD, "$signed(lane_sum)"),
                                                full=False)
    assert (checked, wrong, wg_checked) == (10 * 65536, 0, 20000) and wg_wrong > 0


@pytest.mark.slow
def test_every_operand_triple_against_the_plain_products(tmp_path):  # about a minute of Icarus
    assert _run(tmp_path, RTL_DIR / "csb_group_packed.v", full=True) == (1 << 24, 0, 20000, 0)
