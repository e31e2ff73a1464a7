"""The machine a reproduction ran on, recorded beside its figures.

Why: the same code and seed give different last bits of a float32 result on
CPUs with different vector units (torch picks its kernels by instruction
set, and they sum in different orders), so ``codesign reproduce check``
demands bit-identical reruns only on a machine whose record matches, and a
statistical tolerance elsewhere. The record names no path and no host.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

TRAINING_THREADS = 1  # torch threads of every training task (codesign.reproduce.common.train_task)
MACHINE_KEYS = ("cpu_model", "machine", "cpu_capability", "torch", "numpy", "python", "threads")  # what moves bits


def cpu_model() -> str:
    """The CPU's marketing name (``/proc/cpuinfo``'s model name, else what :mod:`platform` says; '' if unknown)."""
    import platform

    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith(("model name", "hardware")) and ":" in line:
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_record() -> dict[str, Any]:
    """The machine a reproduction ran on, as far as it can move a float32 result: no path, no host name.

    torch picks its vectorised kernels by the CPU's instruction set (``cpu_capability``: DEFAULT, AVX2,
    AVX512; ``ATEN_CPU_CAPABILITY`` can lower it), and those kernels sum in different orders, so the same code
    and seed give different last bits on different CPUs. ``threads`` is the torch thread count every training
    task runs with. With a remote Dask scheduler the workers may be other machines: this records the machine
    that wrote the report.
    """
    import os
    import platform

    import numpy
    import torch

    return {"cpu_model": cpu_model(), "machine": platform.machine(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "aten_cpu_capability_env": os.environ.get("ATEN_CPU_CAPABILITY", ""),
            "torch": torch.__version__, "numpy": numpy.__version__, "python": platform.python_version(),
            "threads": TRAINING_THREADS}


def same_machine(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Whether two machine records promise the same float path (every key of :data:`MACHINE_KEYS` equal)."""
    return bool(a) and bool(b) and all(a.get(key) == b.get(key) for key in MACHINE_KEYS)


def machine_text(machine: Mapping[str, Any]) -> str:
    """The record as one sentence of a report's table."""
    return (f"Machine: {machine['cpu_model']} ({machine['machine']}), torch CPU capability "
            f"{machine['cpu_capability']}, torch {machine['torch']}, numpy {machine['numpy']}, "
            f"Python {machine['python']}, {machine['threads']} torch thread(s) per training run.")
