"""Yosys reports from the cache or the repository, used only when their recorded RTL hash matches the RTL here."""

from __future__ import annotations

import json

import pytest

from codesign.hw import estimate_cache as ec
from codesign.hw.estimate_cache import SHIPPED_DIR, cache_key, cached_report, entry_name, lookup, rtl_sha256
from codesign.pe import get_pe, pe_names

FAMILIES = ("xc7", "xcup")


def _report(pe, spec, family, **label) -> dict:
    return {"schema": "codesign-pe-cost", "version": 1, "pe": pe.name, "top": pe.rtl_top,
            "tool": {"name": "yosys", "version": "Yosys 0.23 (git sha1 7ce5011c24b)", "flow": "synth_xilinx"},
            "entries": [{"family": family, "spec": spec.to_dict(), "label": pe.describe_spec(spec),
                         "counts": {"lut": 11, "ff": 22, "dsp": 1, "bram_36k": 0}}], **label}


@pytest.fixture
def fake_yosys(monkeypatch):
    """Stands in for estimate(): records each call and writes a report as Yosys would."""
    calls = []

    def estimate(pe, specs, *, families, out_dir, plot, progress):
        calls.append((pe.name, specs[0], families[0]))
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / f"{pe.name}_cost.json").write_text(json.dumps(_report(pe, specs[0], families[0])))

    monkeypatch.setattr(ec, "estimate", estimate)
    return calls


def _ship(pe, spec, family, folder, **changes):
    key = cache_key(pe, spec, family)
    label = {"cache_key": key, "rtl_sha256": rtl_sha256(pe), **changes}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{entry_name(pe, family, key)}.json"
    path.write_text(json.dumps(_report(pe, spec, family, **label)))
    return path


def test_a_shipped_report_with_matching_hashes_is_used_without_yosys(tmp_path, fake_yosys):
    pe = get_pe("fpmac")
    spec = pe.spec(max_fb=5)
    path = _ship(pe, spec, "xc7", tmp_path / "shipped")
    found = cached_report(pe, spec, "xc7", tmp_path / "cache", shipped_dir=tmp_path / "shipped")
    assert (found.origin, found.path, found.entry["counts"]["lut"]) == ("shipped", path, 11)
    assert found.yosys_version.startswith("Yosys 0.23") and fake_yosys == []
    assert not (tmp_path / "cache").exists()  # nothing copied or run


@pytest.mark.parametrize("field", ["rtl_sha256", "cache_key"])
def test_a_shipped_report_whose_hash_differs_is_never_used(tmp_path, fake_yosys, field):
    pe = get_pe("fpmac")
    spec = pe.spec(max_fb=5)
    _ship(pe, spec, "xc7", tmp_path / "shipped", **{field: "0" * 64})
    report, why = lookup(pe, spec, "xc7", tmp_path / "cache", shipped_dir=tmp_path / "shipped")
    assert report is None and why.startswith("shipped report not used") and field in why
    found = cached_report(pe, spec, "xc7", tmp_path / "cache", shipped_dir=tmp_path / "shipped")
    assert found.origin == "yosys" and fake_yosys == [("fpmac", spec, "xc7")]
    assert "ran Yosys" in found.note
    # Yosys' report is labelled and cached: the next call reads it
    assert (found.report["cache_key"], found.report["rtl_sha256"]) == (cache_key(pe, spec, "xc7"), rtl_sha256(pe))
    again = cached_report(pe, spec, "xc7", tmp_path / "cache", shipped_dir=tmp_path / "shipped")
    assert again.origin == "cache" and len(fake_yosys) == 1


def test_the_key_follows_the_rtl_spec_and_family():
    pe = get_pe("fpmac")
    keys = {cache_key(pe, pe.spec(max_fb=fb), family) for fb in (5, 6) for family in FAMILIES}
    assert len(keys) == 4
    assert cache_key(pe, pe.spec(max_fb=5), "xc7") == cache_key(pe, pe.spec(max_fb=5), "xc7")
    assert rtl_sha256(pe) != rtl_sha256(get_pe("csb"))


def test_ship_copies_only_labelled_entries(tmp_path, fake_yosys):
    pe = get_pe("fpmac")
    spec = pe.spec(max_fb=5)
    cached_report(pe, spec, "xcup", tmp_path / "cache", shipped_dir=None)
    old = tmp_path / "cache" / "fpmac-xc7-0123456789abcdef" / "fpmac_cost.json"  # written before labels existed
    old.parent.mkdir()
    old.write_text(json.dumps(_report(pe, spec, "xc7")))
    written = ec.ship(tmp_path / "cache", tmp_path / "shipped")
    assert [path.name for path in written] == [f"{entry_name(pe, 'xcup', cache_key(pe, spec, 'xcup'))}.json"]
    assert lookup(pe, spec, "xcup", tmp_path / "empty", shipped_dir=tmp_path / "shipped")[0].origin == "shipped"


def test_ship_leaves_entries_of_other_rtl_in_the_cache(tmp_path, fake_yosys):
    pe = get_pe("fpmac")
    cached_report(pe, pe.spec(max_fb=5), "xcup", tmp_path / "cache", shipped_dir=None)
    assert ec.ship(tmp_path / "cache", tmp_path / "shipped", current={"fpmac": "0" * 64}) == []
    assert len(ec.ship(tmp_path / "cache", tmp_path / "shipped", current={"fpmac": rtl_sha256(pe)})) == 1


def test_the_repository_ships_every_report_the_quick_demo_needs_for_this_rtl():
    """Each PE's estimate specs and the demo design's IPs on both families: a shipped report labelled for this RTL.

    When this fails, the RTL or a spec changed: `make yosys-reports` runs the syntheses and ships their reports.
    """
    from codesign.demo import DEMO_DESIGN
    from codesign.design import load_design
    from codesign.resources import data_dir

    needed = [(get_pe(name), spec, family) for name in pe_names() for spec in get_pe(name).estimate_specs()
              for family in FAMILIES]
    for board in ("zedboard", "ultra96v2"):
        design = load_design(data_dir("examples") / DEMO_DESIGN, board_name=board)
        needed += [(get_pe(ip.pe), ip.spec, design.board.yosys_family) for ip in design.instances]
    missing = []
    for pe, spec, family in needed:
        report, why = lookup(pe, spec, family, SHIPPED_DIR / "no-cache", shipped_dir=SHIPPED_DIR)
        if report is None:
            missing.append(f"{pe.name} {pe.describe_spec(spec)} {family}: {why}")
        else:
            assert report.entry["family"] == family and report.entry["spec"] == spec.to_dict()
    assert not missing, "run `make yosys-reports`:\n" + "\n".join(missing)


def test_the_tt_resource_table_in_the_docs_gives_the_shipped_reports():
    """docs/tt_pe.md's table of TT PE resources: every row's LUT, FF, DSP and BRAM36 as the report shipped for
    this RTL gives them (a reship that moves a figure fails here until the table follows)."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "tt_pe.md").read_text()
    changes = {"`a_bits = 16`": {"a_bits": 16}, "8 lanes × 4 rows": {"lanes": 8, "rows": 4}, "8 lanes": {"lanes": 8}}
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in text.splitlines()
            if line.startswith("| tt") and line.count("|") == 8]
    assert len(rows) == 18
    for name, config, family, *figures in rows:
        pe = get_pe(name)
        spec = pe.spec(**next((change for label, change in changes.items() if config == label), {}))
        report, why = lookup(pe, spec, family, SHIPPED_DIR / "no-cache", shipped_dir=SHIPPED_DIR)
        assert report is not None, why
        counts = report.entry["counts"]
        assert [int(figure.replace(" ", "")) for figure in figures] == [
            counts[key] for key in ("lut", "ff", "dsp", "bram_36k")], f"{name} {config} {family}"
