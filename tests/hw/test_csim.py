"""The C simulation's precompiled prelude: built once, used by every compile, and harmless when broken."""

from __future__ import annotations

from pathlib import Path

import pytest

from codesign.hw import csim
from codesign.hw.aptypes import ap_types_dir

PROGRAM = """#include <ap_fixed.h>
#include <cstdio>
int main() {
    ap_fixed<8, 3, AP_RND_CONV, AP_SAT> x = 1.3125;   // rounds to even, inside the range
    ap_fixed<8, 3, AP_RND_CONV, AP_SAT> big = 100.0;  // saturates at 3.96875
    std::printf("vectors=%d mismatches=%d\\n", x.to_double() == 1.3125 ? 2 : 0, big.to_double() == 3.96875 ? 0 : 1);
    return big.to_double() == 3.96875 ? 0 : 1;
}
"""


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CODESIGN_AP_TYPES", str(ap_types_dir()))
    monkeypatch.setenv("CODESIGN_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "check.cpp"
    source.write_text(PROGRAM)
    return source


def compile_and_run(source: Path, build_dir: Path) -> csim.CsimResult:
    vectors = build_dir.parent / "vectors.txt"
    vectors.write_text("")
    return csim.csim([source], include_dirs=[], vectors=vectors, build_dir=build_dir, name="check")


@pytest.mark.slow  # 6 to 8 s of compiles in a cache of its own; make test's C-sim tests all compile with the prelude
def test_the_prelude_is_built_once_and_every_compile_uses_it(private_cache, tmp_path):
    result = compile_and_run(private_cache, tmp_path / "one")
    assert (result.vectors, result.mismatches) == (2, 0)
    compiled = list((tmp_path / "cache" / "pch").glob(f"*/{csim.PRELUDE_NAME}.gch"))
    assert len(compiled) == 1 and compiled[0].stat().st_size > 0
    stamp = compiled[0].stat().st_mtime_ns
    again = compile_and_run(private_cache, tmp_path / "two")
    assert not again.cached and (again.vectors, again.mismatches) == (2, 0)
    assert compiled[0].stat().st_mtime_ns == stamp  # not rebuilt


@pytest.mark.slow  # three compiles from an empty cache
def test_a_broken_precompiled_header_falls_back_to_the_headers(private_cache, tmp_path):
    compile_and_run(private_cache, tmp_path / "one")
    (compiled,) = (tmp_path / "cache" / "pch").glob(f"*/{csim.PRELUDE_NAME}.gch")
    compiled.write_bytes(b"not a precompiled header")
    result = compile_and_run(private_cache, tmp_path / "two")
    assert (result.vectors, result.mismatches) == (2, 0)
