"""C simulation of a TT layer step: the generated HLS kernels of PE1, PE2 and PE3 compiled with g++ into one driver.

The kernels are rendered exactly as ``codesign generate tt1|tt2|tt3`` renders
them (:func:`codesign.hw.flow.render_project`, tops ``tt1_kernel``,
``tt2_kernel``, ``tt3_kernel``), next to ``codesign_tt.h``; the driver
(``hls_templates/tt/step_driver.cpp.j2``) only moves words between files and
the kernels' streams. Executables are cached by content hash
(:func:`codesign.hw.csim.compile_testbench`), so only the first run compiles.

Each kernel keeps its build's stream width (``stream_bits`` of 32, 64 or
128): the files between Python and the driver hold 32-bit words, a stream
word being ``stream_bits / 32`` of them, least significant first (the
layout of :func:`codesign.pe.tt.golden.words` and of a DMA buffer), and the
driver packs and unpacks them per kernel.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from codesign.hw.csim import RUN_TIMEOUT_S, CsimError, compile_testbench
from codesign.hw.flow import render_project
from codesign.hw.render import render_template
from codesign.io.reports import write_bytes_atomic
from codesign.hw.target import BuildTarget
from codesign.hw.vectors import WORD_BITS
from codesign.pe import get_pe
from codesign.pe.tt import golden
from codesign.pe.tt.golden import result_shape
from codesign.pe.tt.contract import STATUS_OK, output_parts, word_parts
from codesign.step.tt.schedule import StepHardware

PES = ("tt1", "tt2", "tt3")
DRIVER_FILE = "tt_step_driver.cpp"
DRIVER_TEMPLATE = "tt/step_driver.cpp.j2"


def render_sources(hardware: StepHardware) -> dict[str, bytes]:
    """Every file of the driver build: the three generated kernels (sources, headers, ``codesign_tt.h``) and the
    driver."""
    files: dict[str, bytes] = {}
    tops = []
    for name in PES:
        pe = get_pe(name)
        target = BuildTarget().resolve(pe.name, pe.interfaces)
        project = render_project(pe, hardware.spec(name), target, with_vectors=False)
        for file in pe.kernel_files:
            files[file] = project.files[file]
        tops.append({"name": target.top, "stream_bits": hardware.spec(name).stream_bits})
    driver = render_template(DRIVER_TEMPLATE, {"driver_file": DRIVER_FILE, "tops": tops, "word_bits": WORD_BITS})
    files[DRIVER_FILE] = driver.encode()
    return files


def _decode(words: np.ndarray, shape: tuple[int, ...], stream_bits: int) -> np.ndarray:
    """Results of one accepted transaction from its output as 32-bit words: the status word, then the results
    packed ``stream_bits / 32`` to a stream word, the last one's unused parts 0."""
    parts, count = word_parts(stream_bits), int(np.prod(shape))
    if words.size < parts or int(words[0]) != STATUS_OK or words[1:parts].any():
        raise CsimError(f"a PE refused a transaction of the schedule (status word {words[:parts].tolist()})")
    if words.size != output_parts(count, stream_bits) or words[parts + count:].any():
        raise CsimError(f"a PE produced {words.size - parts} result words at {stream_bits} bits, expected "
                        f"{output_parts(count, stream_bits) - parts} for shape {shape} (padding 0)")
    values = words[parts:parts + count].astype(np.int64)
    return np.where(values >= 1 << 31, values - (1 << 32), values).reshape(shape)


class CsimRunner:
    """Runs PE calls through the generated HLS C++ of the three PEs, compiled once per hardware into ``work_dir``.

    Each :meth:`run` writes the calls' input words (:func:`codesign.pe.tt.golden.words`)
    to one file, runs the driver once, and decodes the output words; a
    refused header, a short or long output or unread input words are errors.
    ``words_in`` and ``words_out`` count the 32-bit words (bytes / 4) that
    went in and came out, at any stream width: the units of the step's
    traffic model (:func:`codesign.step.tt.cycles.step_cycles`).
    """

    name = "csim"

    def __init__(self, hardware: StepHardware, work_dir: Path) -> None:
        self.hardware = hardware
        self.work_dir = Path(work_dir)
        source_dir = self.work_dir / "src"
        files = render_sources(hardware)
        for name, data in files.items():
            path = source_dir / name
            if not path.is_file() or path.read_bytes() != data:
                write_bytes_atomic(path, data)
        sources = [source_dir / name for name in files if name.endswith(".cpp")]
        self.build = compile_testbench(sources, include_dirs=[source_dir], build_dir=self.work_dir / "bin",
                                       name="tt_step")
        self.calls = 0
        self.words_in = 0
        self.words_out = 0

    def run(self, hardware: StepHardware, calls: Sequence[tuple[str, np.ndarray, np.ndarray]]) -> list[np.ndarray]:
        if hardware != self.hardware:
            raise ValueError("the C simulation was compiled for other PE builds")
        lines = [str(len(calls))]
        shapes = []
        widths = []
        for pe, a, b in calls:
            spec = hardware.spec(pe)
            words = golden.words(spec, a, b)
            lines.append(f"{PES.index(pe)} {words.size} " + " ".join(str(int(w)) for w in words))
            shapes.append(result_shape(pe, a, b))
            widths.append(spec.stream_bits)
            self.words_in += words.size
        with tempfile.TemporaryDirectory(dir=self.work_dir) as scratch:
            in_path, out_path = Path(scratch) / "in.txt", Path(scratch) / "out.txt"
            in_path.write_text("\n".join(lines) + "\n")
            try:
                done = subprocess.run([str(self.build.executable), str(in_path), str(out_path)], capture_output=True,
                                      text=True, timeout=RUN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                raise CsimError(f"the TT step driver ran longer than {RUN_TIMEOUT_S:.0f} s") from None
            if done.returncode != 0:
                raise CsimError(f"the TT step driver failed (exit status {done.returncode}): {done.stderr.strip()}")
            rows = out_path.read_text().splitlines()
        if len(rows) != len(calls):
            raise CsimError(f"the TT step driver answered {len(rows)} of {len(calls)} transactions")
        results = []
        for row, shape, width in zip(rows, shapes, widths):
            fields = np.array([int(v) for v in row.split()], dtype=np.uint64)
            count, left = int(fields[0]), int(fields[1])
            if left or count != fields.size - 2:
                raise CsimError(f"a transaction left {left} input words unread or its output is malformed")
            results.append(_decode(fields[2:], shape, width))
            self.words_out += count
        self.calls += len(calls)
        return results
