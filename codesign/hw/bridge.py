"""The accelerator's synthesised C++ as a Python callable: g++ shared library + ctypes.

The emulated PYNQ board runs an accelerator IP on ``ap_start`` by calling
:meth:`AccelBridge.run`: the very top function the HLS project synthesises
(``<top>.cpp`` with its headers, as written by
:func:`codesign.shell.ip.render_accel_project`) plus a generated
``extern "C"`` entry (``<top>_bridge.cpp``, from
``hls_templates/accel/bridge.cpp.j2``), compiled with g++ and the ap_types
headers into a shared library. What would be synthesised is what runs.

Libraries are cached under a hash of the compiler, flags and the bytes of
every source and project header (:func:`codesign.hw.csim.build_key`), so a
second bridge over an identical project loads without compiling. They are
linked under a temporary name and renamed, so concurrent builds are safe.

The PE's ``process()`` keeps ``static`` state between calls as the hardware
keeps its registers: one loaded library is one IP instance.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np

from codesign.contracts.shell import SHELL_ARGS, project_files
from codesign.hw.aptypes import cache_dir
from codesign.hw.csim import (COMPILE_TIMEOUT_S, KERNEL_CXX_FLAGS, CsimError, _include_dirs, build_key, compiler,
                              precompiled_prelude)

LIBRARY_FLAGS = (*KERNEL_CXX_FLAGS, "-shared", "-fPIC")
ENTRY = "codesign_accel_run"
NAME_ENTRY = "codesign_accel_top"
WORD_DTYPE = np.uint32
MAX_WORDS = (1 << 32) - 1  # the count registers are 32 bits


class BridgeError(RuntimeError):
    """The bridge could not be built or loaded, or was called with buffers that do not fit."""


def default_build_dir() -> Path:
    return cache_dir() / "bridge"


def build_library(project_dir: Path, build_dir: Path | None = None) -> tuple[Path, float]:
    """Compile the project's top and bridge into ``<build_dir>/<top>-<hash>.so``; return it and compile seconds.

    A library already built from identical sources is reused (0.0 s).
    """
    files = project_files(project_dir)
    sources = [files["top_cpp"].resolve(), files["bridge"].resolve()]
    missing = [str(path) for path in sources if not path.is_file()]
    if missing:
        raise BridgeError(f"bridge sources missing: {', '.join(missing)}")
    cxx = compiler()
    dirs = _include_dirs([Path(project_dir)])
    headers = sorted(dirs[1].glob("*.h"), key=lambda h: h.name)
    key = build_key(cxx, [*LIBRARY_FLAGS, f"-I{dirs[0]}"], sources, headers)
    build_dir = Path(build_dir) if build_dir is not None else default_build_dir()
    build_dir.mkdir(parents=True, exist_ok=True)
    stem = files["top_cpp"].stem
    library = build_dir / f"{stem}-{key}.so"
    if library.is_file():
        return library, 0.0
    handle, partial = tempfile.mkstemp(dir=build_dir, prefix=f".{stem}-", suffix=".so")
    os.close(handle)
    started = time.perf_counter()
    try:
        # a shared object's code is PIC
        prelude = precompiled_prelude(cxx, [*KERNEL_CXX_FLAGS, "-fPIC", f"-I{dirs[0]}"])
        done = subprocess.run([cxx, *LIBRARY_FLAGS, *(f"-I{d}" for d in dirs), "-Winvalid-pch", "-include", str(prelude),
                               *map(str, sources), "-o", partial],
                              capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
        if done.returncode != 0:
            raise BridgeError(f"compiling the bridge of {stem} failed:\n{done.stderr[-4000:]}")
        os.replace(partial, library)
    except CsimError as error:
        raise BridgeError(str(error)) from None
    finally:
        Path(partial).unlink(missing_ok=True)
    return library, time.perf_counter() - started


def _ctype(arg) -> type:
    if arg.kind == "pointer":
        return ctypes.c_void_p
    return {8: ctypes.c_uint8, 16: ctypes.c_uint16, 32: ctypes.c_uint32, 64: ctypes.c_uint64}[arg.width]


class AccelBridge:
    """One accelerator IP's top function, callable on NumPy ``uint32`` buffers.

    ``AccelBridge(project_dir).run(in_words, out_words, n_in, n_out, n_transactions)``
    does what one ``ap_start`` of the IP does to memory: reads ``n_in`` words
    of ``in_words``, runs ``n_transactions`` transactions and writes ``n_out``
    words into ``out_words`` (in place; it is also returned). Nothing past
    ``n_out`` is written.
    """

    def __init__(self, project_dir: Path, *, build_dir: Path | None = None) -> None:
        try:
            self.library_path, self.compile_seconds = build_library(Path(project_dir), build_dir)
        except CsimError as error:
            raise BridgeError(str(error)) from None
        self.top = project_files(project_dir)["top_cpp"].stem
        self._lib = ctypes.CDLL(str(self.library_path))
        name = ctypes.CFUNCTYPE(ctypes.c_char_p)((NAME_ENTRY, self._lib))()
        if name.decode() != self.top:
            raise BridgeError(f"{self.library_path} implements {name.decode()!r}, not {self.top!r}")
        self._entry = getattr(self._lib, ENTRY)
        self._entry.restype = None
        self._entry.argtypes = [_ctype(arg) for arg in SHELL_ARGS]
        self.invoke: Callable[[list], None] | None = None  # runs the top function elsewhere (see _call)

    @property
    def entry(self):
        """The library's top function (ctypes), as :attr:`invoke` may call it in another process."""
        return self._entry

    def run(self, in_words: np.ndarray, out_words: np.ndarray, n_in: int, n_out: int,
            n_transactions: int) -> np.ndarray:
        """One call of the IP; buffers must be C-contiguous uint32 arrays holding at least n_in / n_out words."""
        buffers = {"in": in_words, "out": out_words}
        counts = {"n_in": n_in, "n_out": n_out, "n_transactions": n_transactions}
        for name, count in counts.items():
            if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or not 0 <= count <= MAX_WORDS:
                raise BridgeError(f"{name}={count!r} must be an integer in [0, {MAX_WORDS}]")
        for name, buffer in buffers.items():
            if not isinstance(buffer, np.ndarray) or buffer.dtype != WORD_DTYPE or buffer.ndim != 1:
                raise BridgeError(f"{name} must be a one-dimensional numpy uint32 array")
            if not buffer.flags.c_contiguous:
                raise BridgeError(f"{name} must be C-contiguous")
        if not out_words.flags.writeable:
            raise BridgeError("out must be writeable")
        if in_words.size < n_in:
            raise BridgeError(f"in holds {in_words.size} words, fewer than n_in={n_in}")
        if out_words.size < n_out:
            raise BridgeError(f"out holds {out_words.size} words, fewer than n_out={n_out}")
        self._call({**buffers, **counts, "calls": None, "n_calls": 0})
        return out_words

    def run_list(self, arena: np.ndarray, descriptors: np.ndarray, n_calls: int, *, stream_bits: int = 32
                 ) -> np.ndarray:
        """One ap_start of the IP in list mode: ``n_calls`` descriptors of ``descriptors`` run on ``arena`` (in
        place; also returned). Every descriptor is decoded and every block checked to lie inside the arena, in
        whole ``stream_bits`` beats, first, as the driver does: the C++ would read or write past it."""
        from codesign.contracts.calls import CallListError, check_list, decode_list

        for name, buffer in (("arena", arena), ("descriptors", descriptors)):
            if not isinstance(buffer, np.ndarray) or buffer.dtype != WORD_DTYPE or buffer.ndim != 1 \
                    or not buffer.flags.c_contiguous:
                raise BridgeError(f"{name} must be a one-dimensional C-contiguous numpy uint32 array")
        if isinstance(n_calls, bool) or not isinstance(n_calls, (int, np.integer)):
            raise BridgeError(f"n_calls={n_calls!r} must be an int")
        try:
            check_list(decode_list(descriptors, int(n_calls)), arena.nbytes, stream_bits)
        except CallListError as error:
            raise BridgeError(f"call list: {error}") from None
        self._call({"in": arena, "out": arena, "n_in": 0, "n_out": 0, "n_transactions": 0,
                    "calls": descriptors, "n_calls": int(n_calls)})
        return arena

    def _call(self, values: dict) -> None:
        """The top function with every argument of :data:`SHELL_ARGS` (a pointer's buffer or None, a count): here,
        or through ``invoke`` when one is set (the emulated board's watchdog, which takes the buffers)."""
        args = [values[arg.name] if arg.kind == "pointer" else int(values[arg.name]) for arg in SHELL_ARGS]
        if self.invoke is not None:
            self.invoke(args)
            return
        self._entry(*[arg.ctypes.data if isinstance(arg, np.ndarray) else arg for arg in args])
