"""csb_group_packed on its own: two lanes' products from one 25 x 8 multiplication (a DSP slice), against the plain
products under Icarus, every (lo, hi) pair of signed 8-bit codes for ten weights (every weight in make test-slow:
all 2^24 triples); the same bench finds wrong products in a copy without the high part's borrow."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

RTL_DIR = Path(__file__).resolve().parents[2] / "rtl" / "csb"
BENCH = Path(__file__).resolve().parent / "csb_group_packed_check.v"
pytestmark = pytest.mark.skipif(shutil.which("iverilog") is None, reason="Icarus Verilog (iverilog) is not on PATH")
BORROW = " + {15'd0, p[15]};"


def _run(tmp_path: Path, group: Path, *, full: bool) -> tuple[int, int]:
    """(products checked, triples with a wrong product)."""
    binary = tmp_path / f"check_{group.parent.name}.vvp"
    subprocess.run(["iverilog", "-g2005", *(["-DFULL"] if full else []), "-o", str(binary),
                    "-s", "csb_group_packed_check", str(BENCH), str(group), str(RTL_DIR / "csb_sat_add.v")],
                   check=True, capture_output=True, text=True)
    done = subprocess.run(["vvp", "-n", str(binary)], check=True, capture_output=True, text=True, timeout=900)
    checked, wrong = (int(v) for v in done.stdout.split()[:2])
    return checked, wrong


def test_ten_weights_against_the_plain_products_and_a_missing_borrow_is_caught(tmp_path):
    assert _run(tmp_path, RTL_DIR / "csb_group_packed.v", full=False) == (10 * 65536, 0)
    source = (RTL_DIR / "csb_group_packed.v").read_text()
    assert source.count(BORROW) == 1
    broken = tmp_path / "broken" / "csb_group_packed.v"
    broken.parent.mkdir()
    broken.write_text(source.replace(BORROW, ";"))
    checked, wrong = _run(tmp_path, broken, full=False)
    assert checked == 10 * 65536 and wrong > 0


@pytest.mark.slow
def test_every_operand_triple_against_the_plain_products(tmp_path):  # about a minute of Icarus
    assert _run(tmp_path, RTL_DIR / "csb_group_packed.v", full=True) == (1 << 24, 0)
