"""The wheel carries hls_templates/, rtl/ and boards/, and codesign works from it outside the checkout."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(REPO)],
        check=True, capture_output=True,
    )
    return next(out.glob("codesign-*.whl"))


def test_wheel_ships_the_data_trees(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    for tree, sample in (("hls_templates", "include/codesign_fpmac.h"), ("rtl", "fpmac/fpmac.v"), ("boards", "zedboard.toml")):
        assert f"codesign/_data/{tree}/{sample}" in names
    assert any(name.endswith("entry_points.txt") for name in names)


def test_installed_wheel_generates_a_project_outside_the_checkout(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    script = (
        "import codesign, codesign.resources as r, codesign.boards as b\n"
        "from pathlib import Path\n"
        "from codesign.pe.fpmac import FpmacSpec\n"
        "from codesign.hw.flow import generate_project\n"
        "from codesign.pe import get_pe\n"
        f"assert Path(codesign.__file__).is_relative_to({str(site)!r}), codesign.__file__\n"
        "assert r.data_dir('rtl').parent.name == '_data'\n"
        "assert set(b.boards()) == {'zedboard', 'ultra96v2', 'pynqz2', 'kv260'}\n"
        f"files = generate_project(get_pe('fpmac'), FpmacSpec(max_fb=10), Path({str(tmp_path / 'proj')!r}))\n"
        "print(len(files))\n"
    )
    # run from an unrelated directory, with the unpacked wheel first on the path
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env={"PYTHONPATH": str(site), "HOME": str(tmp_path)},
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip()) >= 4
    assert (tmp_path / "proj" / "run_hls.tcl").is_file()


@pytest.mark.slow
def test_installed_wheel_verifies_rtl_with_its_own_bench(wheel, tmp_path):
    """The cocotb benches ship in the package: `codesign verify --level rtl` needs no source checkout."""
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    work = tmp_path / "work"
    script = ("import sys, codesign\nfrom pathlib import Path\nfrom codesign.cli import main\n"
              f"assert Path(codesign.__file__).is_relative_to({str(site)!r}), codesign.__file__\n"
              f"sys.exit(main(['verify', 'fpmac', '--levels', 'rtl', '--max-fb', '4', '--exp-bits', '4', "
              f"'--random-per-fb', '200', '--json', '--work', {str(work)!r}]))\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path,
                          env={"PYTHONPATH": str(site), "HOME": str(Path.home()), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    report = __import__("json").loads(done.stdout)
    assert report["results"][0]["level"] == "rtl" and report["results"][0]["mismatches"] == 0
    assert report["results"][0]["vectors"] > 200
