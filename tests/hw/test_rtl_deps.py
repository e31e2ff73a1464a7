"""The files a top uses: derived from module names, checked against Icarus elaborating each PE from them alone."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from codesign.hw.constants_gen import verilog_include_dir
from codesign.hw.estimate_cache import hashed_sources
from codesign.hw.rtl_deps import declared_modules, used_sources
from codesign.pe import get_pe, pe_names

needs_iverilog = pytest.mark.skipif(shutil.which("iverilog") is None, reason="Icarus Verilog (iverilog) is not on PATH")


def _files(tmp_path, **texts):
    paths = []
    for name, text in texts.items():
        (tmp_path / f"{name}.v").write_text(text)
        paths.append(tmp_path / f"{name}.v")
    return paths


def test_the_top_takes_what_it_names_recursively_and_nothing_else(tmp_path):
    a, b, top, unused, other_top = _files(
        tmp_path,
        a="module a; b u_b (); endmodule\n",
        b="module b; endmodule\n",
        top="module top;\n  a #(.X(1)) u_a ();  // unused u_c ();\n  /* unused */ top_unsupported_parameters u_x ();\n"
            "endmodule\n",
        unused="module unused; endmodule\n",
        other_top="module other_top; unused u (); b u_b (); endmodule\n")
    sources = [a, b, top, unused, other_top]
    assert used_sources(sources, "top") == [a, b, top]  # the order of sources; comments and undeclared names ignored
    assert used_sources(sources, "other_top") == [b, unused, other_top]
    with pytest.raises(FileNotFoundError, match="declares module missing"):
        used_sources(sources, "missing")


def test_a_module_declared_twice_is_refused(tmp_path):
    sources = _files(tmp_path, one="module m; endmodule\n", two="module m; endmodule\n")
    with pytest.raises(ValueError, match="module m is declared in"):
        declared_modules(sources)


def test_each_tt_top_reads_and_hashes_only_its_own_files():
    """A change to one TT top's file leaves the other tops' hashes (Yosys reports, calibrations) as they were."""
    names = {pe: {path.name for path in hashed_sources(get_pe(pe))} for pe in ("tt1", "tt2", "tt3")}
    shared = {"tt_chunk_in.v", "tt_header.v", "tt_pack_out.v", "tt_ram.v", "tt_unpack.v", "codesign_constants.vh"}
    assert names["tt1"] == shared | {"tt1_pe.v", "tt_loader.v", "tt_saturate.v", "tt_beat.v"}
    assert names["tt2"] == shared | {"tt2_pe.v", "tt_loader.v", "tt_saturate.v", "tt_beat.v"}
    assert names["tt3"] == shared | {"tt3_pe.v"}


def _elaborate(pe, sources, tmp_path, parameters=()) -> subprocess.CompletedProcess:
    flags = [f"-P{pe.rtl_top}.{name}={value}" for name, value in parameters]
    return subprocess.run(["iverilog", "-g2012", f"-I{verilog_include_dir()}", "-o", str(tmp_path / "a.vvp"),
                           "-s", pe.rtl_top, *flags, *map(str, sources)], capture_output=True, text=True, check=False)


# every PE at its default parameters, and the builds that use a file the default does not: tt1 with B taken j
# outer, csb packed (csb_group_packed) and with the LOSS unit (csb_loss)
BUILDS = {name: [()] for name in pe_names()}
BUILDS["tt1"].append((("B_ORDER", 1),))
BUILDS["csb"].append((("PACKED", 1), ("BATCH", 2)))
BUILDS["csb"].append((("LOSS", 1),))


@needs_iverilog
@pytest.mark.parametrize("name", list(BUILDS))
def test_every_pe_elaborates_from_its_sources_alone_and_needs_each_of_them(name, tmp_path):
    """Icarus builds the top from :meth:`rtl_sources` alone in each of its builds (a used file left out fails:
    ``Unknown module type``), and some build fails without any one of them (no file is read or hashed that the top
    does not use)."""
    pe = get_pe(name)
    sources = pe.rtl_sources()
    for parameters in BUILDS[name]:
        built = _elaborate(pe, sources, tmp_path, parameters)
        assert built.returncode == 0, built.stdout + built.stderr
    for left_out in sources:
        if left_out.stem != pe.rtl_top:
            rest = [path for path in sources if path != left_out]
            assert any(_elaborate(pe, rest, tmp_path, parameters).returncode != 0 for parameters in BUILDS[name]), \
                f"{pe.rtl_top} builds without {left_out}"
