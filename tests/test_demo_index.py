"""The demo's index.html in a real headless browser (Chromium), and the parts of the demo that need no EDA tool.

The index is written by :func:`codesign.demo.write_index` over a small demo-like folder (real plots from the
project's plotting code, reports, and work files that must stay unlinked), so the test takes seconds; the
browser then renders it (the screenshot must not be blank) and loads every plot, and every link must name a file.
"""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import numpy as np
import pytest

from codesign.demo import Stage, Stages, quick_options, report_files, write_index
from codesign.design.fit import FitReport, plot_fit
from codesign.pe import get_pe

BROWSERS = ("chromium", "chromium-browser")


def _browser() -> str:
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no headless browser: Debian package chromium is not installed (make test installs it)")


def _headless(browser: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--no-first-run", "--disable-dev-shm-usage", *args],
                          capture_output=True, text=True, timeout=120, check=False)


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.body: dict[str, str | None] = {}

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "body":
            self.body = attrs
        for name in ("href", "src"):
            if name in attrs:
                self.links.append(attrs[name])


def _fit(lut: float) -> FitReport:
    budget = {"lut": 53200, "ff": 106400, "dsp": 220, "bram_36k": 140}
    ip = {"pe": {"lut": lut, "ff": 900.0, "dsp": 16.0, "bram_36k": 4.0},
          "shell": {"lut": 800.0, "ff": 1200.0, "dsp": 0.0, "bram_36k": 2.0}}
    ip["total"] = {key: ip["pe"][key] + ip["shell"][key] for key in budget}
    return FitReport(design="digits_abvs", board="zedboard", family="xc7", budget=budget, per_ip={"gemm": ip},
                     total=ip["total"], limit_percent=90.0)


@pytest.fixture
def demo_folder(tmp_path) -> tuple[Path, list[Stage]]:
    """A demo-like output folder: reports and plots where the demo writes them, work files where it keeps them."""
    out = tmp_path / "demo out"  # a space: links must be quoted
    verify = {"pe": "fpmac", "passed": True, "results": [{"level": level, "vectors": 3000, "mismatches": 0}
                                                         for level in ("golden", "csim", "rtl")]}
    training = {"design": "digits_abvs", "board": "zedboard (emulated)", "epochs": 5,
                "history": [{"accuracy": 0.94}], "golden_history": [{"accuracy": 0.94}],
                "state_words": {"compared": 13140, "differ": 0}}
    for name, text in {"fpmac/verify/verify.md": "# FP-MAC verification\n",
                       "fpmac/verify/verify.json": __import__("json").dumps(verify),
                       "training/training.json": __import__("json").dumps(training),
                       "fpmac/estimate/fpmac_cost.md": "# cost\n", "build/zedboard/README.md": "# build\n",
                       "build/zedboard/design.json": "{}", "build/zedboard/fit.md": "fit\n",
                       "fpmac/hls/run_hls.tcl": "open_project x\n",
                       # work files: never linked one by one
                       "fpmac/verify/rtl/sim_build/results.json": "{}", "estimate-cache/x/fpmac_cost.json": "{}",
                       "fpmac/estimate/yosys/fpmac-xc7/stat.json": "{}", "codesign_output.json": "{}"}.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)
    plot_fit(_fit(20000.0), out / "build" / "zedboard" / "fit.png")
    (out / "build" / "zedboard" / "fit.json").write_text(__import__("json").dumps(_fit(20000.0).to_dict()))
    plot_fit(_fit(5000.0), out / "training" / "training.png")
    stages = Stages(3, log=lambda text: None)
    with stages.stage("fpmac: verify"):
        pass
    with stages.stage("fit and build folder for zedboard") as stage:
        stage.detail = "fit: lut 39.1 %"
    return out, stages.stages


def test_index_links_every_report_and_only_reports(demo_folder):
    out, stages = demo_folder
    index = write_index(out, stages, title="codesign demo (quick)", total_seconds=12.0,
                        extra_links=[Path("fpmac/hls/run_hls.tcl"), Path("missing/build.tcl")])
    parser = _Links()
    parser.feed(index.read_text())
    linked = {unquote(link) for link in parser.links}
    reports = {path.as_posix() for path in report_files(out)}
    assert reports == {"fpmac/verify/verify.md", "fpmac/verify/verify.json", "fpmac/estimate/fpmac_cost.md",
                       "training/training.json",
                       "build/zedboard/README.md", "build/zedboard/design.json", "build/zedboard/fit.md",
                       "build/zedboard/fit.png", "build/zedboard/fit.json", "training/training.png"}
    rendered = {f"{name}.html" if name.endswith((".md", ".json")) else name for name in reports}
    assert rendered | {"fpmac/hls/run_hls.tcl"} == linked  # every report (.md/.json as their rendered pages),
    # the extra file that exists, nothing else
    assert all(not urlsplit(link).scheme and not link.startswith("/") for link in parser.links)  # relative
    assert all((out / unquote(link)).is_file() for link in parser.links)
    text = index.read_text()  # the page opens on the results, before the stages and the file lists
    assert text.index("<h2>Results</h2>") < text.index("<h2>Stages</h2>") < text.index("<h2>training</h2>")
    assert "<b>94.0 %</b> on the emulated board, 94.0 % in the golden loop; 0 of 13,140 state words differ" in text
    assert text.count("<td class='num ok'>0</td>") == 3 and "<b>zedboard: fits</b> (limit 90 %)" in text
    assert text.count("build/zedboard/fit.png'><img") == 1  # shown once, in the results
    page = (out / "fpmac" / "verify" / "verify.md.html").read_text()
    assert "<h1>FP-MAC verification</h1>" in page and "href='verify.md'" in page  # rendered, the raw file linked


def test_index_renders_in_chromium_with_every_plot(demo_folder, tmp_path):
    browser = _browser()
    out, stages = demo_folder
    index = write_index(out, stages, title="codesign demo (quick)", total_seconds=12.0)
    shot = tmp_path / "shot.png"
    run = _headless(browser, "--window-size=1200,1000", f"--screenshot={shot}", index.as_uri())
    assert shot.is_file(), run.stderr[-2000:]
    from PIL import Image

    pixels = np.asarray(Image.open(shot).convert("RGB")).reshape(-1, 3)
    colours, counts = np.unique(pixels, axis=0, return_counts=True)
    assert len(colours) > 50, f"screenshot has {len(colours)} colours: blank or unstyled"
    assert counts.max() / counts.sum() < 0.97, "screenshot is (almost) a single colour"
    # the rendered DOM after load: every <img> decoded (the page's own check), every link a file
    dom = _headless(browser, "--virtual-time-budget=5000", "--dump-dom", index.as_uri())
    parser = _Links()
    parser.feed(dom.stdout)
    assert parser.body.get("data-plots-loaded") == "2/2", (parser.body, dom.stderr[-2000:])
    assert parser.links and all((out / unquote(link)).is_file() for link in parser.links)


def test_index_of_a_missing_plot_says_so_in_the_browser(demo_folder):
    browser = _browser()
    out, stages = demo_folder
    index = write_index(out, stages, title="demo", total_seconds=1.0)
    (out / "training" / "training.png").write_bytes(b"not a png")  # linked, but no image
    dom = _headless(browser, "--virtual-time-budget=5000", "--dump-dom", index.as_uri())
    parser = _Links()
    parser.feed(dom.stdout)
    assert parser.body.get("data-plots-loaded") == "1/2"
    assert "1 of 2 plots did not load" in dom.stdout


def test_stages_time_each_step_and_close_with_a_table():
    lines = []
    stages = Stages(3, log=lines.append)
    with stages.stage("first") as stage:
        stage.detail = "3 vectors"
    with stages.stage("second") as stage:
        stage.status = "FAIL"
    with pytest.raises(RuntimeError), stages.stage("third"):
        raise RuntimeError("boom\nsecond line")
    assert [s.status for s in stages.stages] == ["ok", "FAIL", "error"]
    assert stages.stages[2].detail == "RuntimeError: boom"
    assert lines[0] == "[demo 1/3] first ..." and lines[1].startswith("[demo 1/3] first: ok in ")
    assert lines[1].endswith(" s (3 vectors)")
    table = stages.table().splitlines()
    assert len(table) == 2 + 3 + 1 and table[-1].startswith("| | **total** | FAIL |")
    assert not stages.passed


@pytest.mark.parametrize("name", ["fpmac", "csb", "tt1", "fpmac_array"])
def test_quick_options_take_a_tenth_of_each_size_and_keep_the_seed(name):
    pe = get_pe(name)
    full, quick = pe.stimulus_options(), quick_options(pe)
    sizes = [field for field in vars(full) if field.startswith(("min_", "random_")) and getattr(full, field) > 0]
    assert sizes, "no stimulus size knob found"
    for field in sizes:
        assert getattr(quick, field) == max(1, getattr(full, field) // 10)
    assert quick.seed == full.seed


@pytest.mark.slow
def test_quick_demo_of_one_pe_takes_its_yosys_table_from_the_shipped_reports(tmp_path):
    """`codesign demo --pe tt3`: verification at every level on a tenth of the stimulus, no Yosys run, an index."""
    import json

    from codesign.cli import main

    out = tmp_path / "demo"
    assert main(["demo", "--pe", "tt3", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert [stage["status"] for stage in summary["stages"]] == ["ok", "ok"] and summary["mode"] == "quick"
    verify = json.loads((out / "tt3" / "verify" / "verify.json").read_text())
    assert [r["level"] for r in verify["results"]] == ["golden", "csim", "rtl"]
    assert all(r["mismatches"] == 0 and r["vectors"] > 0 for r in verify["results"])
    cost = json.loads((out / "tt3" / "estimate" / "tt3_cost.json").read_text())
    assert {entry["origin"] for entry in cost["entries"]} == {"shipped"}
    assert len(cost["entries"]) == 2 * len(get_pe("tt3").estimate_specs())
    assert not (out / "estimate-cache").exists()  # nothing synthesised
    parser = _Links()
    parser.feed((out / "index.html").read_text())
    linked = {unquote(link) for link in parser.links}
    assert {"tt3/verify/verify.md.html", "tt3/estimate/tt3_cost.md.html", "tt3/estimate/tt3_cost.png", "summary.md.html"} <= linked
    assert all((out / link).is_file() for link in linked)


def test_ship_reports_needs_the_full_demo(tmp_path, capsys):
    from codesign.cli import main

    assert main(["demo", "--ship-reports", "--out", str(tmp_path / "demo")]) == 2
    assert "--ship-reports needs --full" in capsys.readouterr().err
    assert not (tmp_path / "demo").exists()


def _limit_rows(pixels: np.ndarray, least: int) -> list[int]:
    """Rows of an RGB image crossed by a thin horizontal red line: at least ``least`` strongly red pixels (the
    limit lines are matplotlib's "red", about a pixel wide, blended where they cross a bar) and, three rows above
    and below, under a third as many. A red bar fills many rows alike, so it is no line."""
    pixels = pixels.astype(np.int32)
    red = (pixels[..., 0] >= 180) & (pixels[..., 0] - np.maximum(pixels[..., 1], pixels[..., 2]) >= 120)
    counts = np.pad(red.sum(axis=1), 3)
    return [int(row) - 3 for row in range(3, counts.size - 3)
            if counts[row] >= least and 3 * max(counts[row - 3], counts[row + 3]) < counts[row]]


def test_every_plot_over_a_budget_shows_its_limit_line_in_chromium(tmp_path):
    """A design at 113 % of the ZedBoard's LUTs (its fit plot) and a PE configuration at 115 % (the cost plot the
    demo writes), rendered in the dashboard by headless Chromium at full width: each plot's red dashed limit line
    crosses it, a line per plot, where its bars pass the budget."""
    from PIL import Image

    from codesign.hw.estimate import plot_cost

    browser = _browser()
    out = tmp_path / "demo"
    (out / "build" / "zedboard").mkdir(parents=True)
    over = _fit(59000.0)  # (59,000 + 800) / 53,200 = 112.4 % of the LUTs
    assert not over.fits
    plot_fit(over, out / "build" / "zedboard" / "fit.png")
    (out / "build" / "zedboard" / "fit.json").write_text(__import__("json").dumps(over.to_dict()))
    entries = [{"family": "xc7", "board": "zedboard", "part": "xc7z020clg484-1", "label": f"fpmac {name}",
                "utilisation_percent": {"lut": lut, "ff": 40.0, "dsp": 20.0, "bram_36k": 10.0}}
               for name, lut in (("narrow", 30.0), ("default", 60.0), ("wide", 115.0), ("widest", 80.0))]
    plot_cost({"entries": entries}, out / "fpmac" / "estimate" / "fpmac_cost.png", "fpmac")
    for plot in (out / "build" / "zedboard" / "fit.png", out / "fpmac" / "estimate" / "fpmac_cost.png"):
        assert _limit_rows(np.asarray(Image.open(plot).convert("RGB")), 150), f"{plot.name} draws no limit line"
    index = write_index(out, [], title="limits", total_seconds=1.0)
    shot = tmp_path / "shot.png"
    run = _headless(browser, "--window-size=1200,3000", f"--screenshot={shot}", index.as_uri())
    assert shot.is_file(), run.stderr[-2000:]
    rows = _limit_rows(np.asarray(Image.open(shot).convert("RGB")), 150)
    lines = [row for index, row in enumerate(rows) if index == 0 or row > rows[index - 1] + 1]  # one per line
    assert len(lines) >= 2, f"limit lines seen in the page at rows {rows}"
