"""C simulation without Xilinx tools: compile a generated HLS kernel and its testbench with g++ and run it.

The testbench reads a golden vector file and prints ``vectors=N mismatches=M``;
its exit status is 0 (all match), 1 (mismatches) or anything else (it refused
the vector file or broke down), which becomes a :class:`CsimError`.
Executables are cached in the build directory under a hash of everything that
goes into them (sources, project headers, compiler, flags), so a second run
on the same project does not recompile.

The ap_types and standard headers every testbench includes are parsed once
per machine into a GCC precompiled header (:func:`precompiled_prelude`),
which takes about a third off each compile (two translation units of about
1.7 s of header parsing each). A compiler that cannot use it falls back to
reading the headers (``-Winvalid-pch`` says so); the result is the same
program either way.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from codesign.hw.aptypes import ap_types_dir, cache_dir
from codesign.numerics.records import keyword_record

CXX_ENV = "CXX"
DEFAULT_CXX = "g++"
# a testbench runs its vectors once, so -O1, which compiles a C-sim case about a quarter faster than -O2; the
# kernels an emulated board runs every step (codesign.hw.bridge) are built at KERNEL_CXX_FLAGS
CXX_FLAGS = ("-std=c++17", "-O1")
KERNEL_CXX_FLAGS = ("-std=c++17", "-O2")
SUMMARY = re.compile(r"^vectors=(\d+) mismatches=(\d+)$", re.MULTILINE)
MISMATCH_LINE = re.compile(r"^mismatch .*$", re.MULTILINE)
EXIT_PASS, EXIT_MISMATCH = 0, 1
COMPILE_TIMEOUT_S = 600.0
PRELUDE_HEADERS = ("ap_int.h", "ap_fixed.h", "hls_stream.h", "cstdio", "cstdint", "string", "vector")
PRELUDE_NAME = "codesign_prelude.h"
RUN_TIMEOUT_S = 600.0


class CsimError(RuntimeError):
    """C simulation could not produce a verdict: no compiler or headers, a compile error, or a refused vector file."""


@keyword_record
class CsimBuild:
    """A compiled testbench. ``compile_seconds`` is wall time (s), 0.0 when the cache served it."""

    executable: Path
    compile_seconds: float
    cached: bool


@keyword_record
class CsimResult:
    """Verdict of one C simulation run. Times are wall-clock seconds."""

    vectors: int
    mismatches: int
    compile_seconds: float
    run_seconds: float
    first_mismatches: str  # the testbench's first "mismatch ..." lines, empty when all match
    executable: Path
    cached: bool

    @property
    def passed(self) -> bool:
        return self.mismatches == 0


def compiler() -> str:
    """Absolute path of the C++ compiler (``$CXX`` or g++); a clear error when there is none."""
    name = os.environ.get(CXX_ENV, DEFAULT_CXX)
    found = shutil.which(name)
    if found is None:
        raise CsimError(f"C++ compiler {name!r} not found on PATH: install g++ (C simulation needs it) or set {CXX_ENV}")
    return found


def _include_dirs(extra: Sequence[Path]) -> list[Path]:
    try:
        ap_types = ap_types_dir()
    except FileNotFoundError as error:
        raise CsimError(str(error)) from None
    return [ap_types, *(Path(d).resolve() for d in extra)]


def build_key(cxx: str, flags: Sequence[str], sources: Sequence[Path], headers: Sequence[Path]) -> str:
    """Content hash of a build: compiler, flags, and the names and bytes of sources and project headers.

    Project include directories enter through their headers' contents, not their
    paths, so the same project in another directory reuses the executable.
    """
    digest = hashlib.sha256()
    for part in (cxx, *flags):
        digest.update(part.encode() + b"\0")
    for path in (*sources, *headers):
        digest.update(Path(path).name.encode() + b"\0")
        digest.update(Path(path).read_bytes() + b"\0")
    return digest.hexdigest()[:20]


def precompiled_prelude(cxx: str, flags: Sequence[str]) -> Path:
    """A header including :data:`PRELUDE_HEADERS`, with its GCC precompiled form beside it, built once per compiler,
    flags and ap_types copy under the cache (``<cache>/pch/<hash>/``). Concurrent builders each write a temporary
    file and rename it, so a reader sees a whole ``.gch`` or none."""
    text = "".join(f"#include <{header}>\n" for header in PRELUDE_HEADERS)
    ap_types = ap_types_dir()
    key = build_key(cxx, [*flags, str(ap_types.resolve()), text], [], sorted(ap_types.glob("*.h")))
    folder = cache_dir() / "pch" / key
    header, compiled = folder / PRELUDE_NAME, folder / f"{PRELUDE_NAME}.gch"
    if compiled.is_file():
        return header
    folder.mkdir(parents=True, exist_ok=True)
    if not header.is_file():
        handle, partial = tempfile.mkstemp(dir=folder, prefix=".prelude-")
        with os.fdopen(handle, "w") as stream:
            stream.write(text)
        os.replace(partial, header)
    handle, partial = tempfile.mkstemp(dir=folder, prefix=".gch-")
    os.close(handle)
    try:
        done = subprocess.run([cxx, *flags, "-x", "c++-header", str(header), "-o", partial],
                              capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
        if done.returncode != 0:
            raise CsimError(f"precompiling the ap_types headers failed:\n{done.stderr[-4000:]}")
        os.replace(partial, compiled)
    finally:
        Path(partial).unlink(missing_ok=True)
    return header


def compile_testbench(
    sources: Sequence[Path], *, include_dirs: Sequence[Path], build_dir: Path, name: str
) -> CsimBuild:
    """Compile ``sources`` into ``build_dir/<name>-<hash>`` unless that executable already exists.

    Headers (``*.h``) found directly in ``include_dirs`` are part of the hash;
    the ap_types headers are identified by their directory. The executable is
    linked under a temporary name and renamed, so concurrent builds are safe.
    """
    sources = [Path(s).resolve() for s in sources]
    for source in sources:
        if not source.is_file():
            raise CsimError(f"source file {source} does not exist")
    cxx = compiler()
    dirs = _include_dirs(include_dirs)
    flags = [*CXX_FLAGS, *(f"-I{d}" for d in dirs)]
    headers = sorted((h for d in dirs[1:] for h in d.glob("*.h")), key=lambda h: (h.name, str(h)))
    key = build_key(cxx, [*CXX_FLAGS, f"-I{dirs[0]}"], sources, headers)
    build_dir = Path(build_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    executable = build_dir / f"{name}-{key}"
    if executable.is_file() and os.access(executable, os.X_OK):
        return CsimBuild(executable=executable, compile_seconds=0.0, cached=True)
    started = time.perf_counter()
    prelude = precompiled_prelude(cxx, flags[: len(CXX_FLAGS) + 1])
    handle, partial = tempfile.mkstemp(dir=build_dir, prefix=f".{name}-")
    os.close(handle)
    try:
        done = subprocess.run(
            [cxx, *flags, "-Winvalid-pch", "-include", str(prelude), *map(str, sources), "-o", partial],
            capture_output=True,
            text=True,
            timeout=COMPILE_TIMEOUT_S,
        )
        if done.returncode != 0:
            raise CsimError(f"compiling {', '.join(s.name for s in sources)} failed:\n{done.stderr[-4000:]}")
        os.replace(partial, executable)
    finally:
        Path(partial).unlink(missing_ok=True)
    return CsimBuild(executable=executable, compile_seconds=time.perf_counter() - started, cached=False)


def parse_summary(stdout: str) -> tuple[int, int]:
    """``(vectors, mismatches)`` from the testbench's ``vectors=N mismatches=M`` line."""
    found = SUMMARY.findall(stdout)
    if len(found) != 1:
        raise CsimError(f"testbench output holds {len(found)} 'vectors=N mismatches=M' lines, expected 1")
    vectors, mismatches = (int(v) for v in found[0])
    return vectors, mismatches


def run_testbench(build: CsimBuild, vectors: Path) -> CsimResult:
    """Run a compiled testbench on a vector file and turn its report into a :class:`CsimResult`."""
    vectors = Path(vectors)
    if not vectors.is_file():
        raise CsimError(f"vector file {vectors} does not exist")
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [str(build.executable), str(vectors.resolve())], capture_output=True, text=True, timeout=RUN_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        raise CsimError(f"{build.executable.name} ran longer than {RUN_TIMEOUT_S:.0f} s on {vectors}") from None
    run_seconds = time.perf_counter() - started
    if done.returncode not in (EXIT_PASS, EXIT_MISMATCH):
        raise CsimError(
            f"testbench {build.executable.name} failed on {vectors} (exit status {done.returncode}):\n"
            f"{(done.stderr or done.stdout).strip()[-4000:]}"
        )
    count, mismatches = parse_summary(done.stdout)
    if (mismatches > 0) != (done.returncode == EXIT_MISMATCH):
        raise CsimError(f"testbench exit status {done.returncode} contradicts mismatches={mismatches}")
    return CsimResult(
        vectors=count,
        mismatches=mismatches,
        compile_seconds=build.compile_seconds,
        run_seconds=run_seconds,
        first_mismatches="\n".join(MISMATCH_LINE.findall(done.stdout)),
        executable=build.executable,
        cached=build.cached,
    )


def csim(sources: Sequence[Path], *, include_dirs: Sequence[Path], vectors: Path, build_dir: Path, name: str) -> CsimResult:
    """Compile (or reuse) the testbench and run it on ``vectors``."""
    build = compile_testbench(sources, include_dirs=include_dirs, build_dir=build_dir, name=name)
    return run_testbench(build, vectors)
