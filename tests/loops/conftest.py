"""What the list trainers' staging tests share: a shell whose phase fails once after its lists and the host's
work beside them ran, and a next batch whose conversion fails."""

from __future__ import annotations

import pytest

from codesign.loops.common import HwTrainError


class FailsAfterBeside:
    """A list shell whose next phase given host work fails once, after that work and the phase's lists ran (a
    list the shell refused at its end): its results are lost, the host's work beside it is not."""

    def __init__(self, shell) -> None:
        self.shell, self.armed = shell, False

    def __getattr__(self, name):
        return getattr(self.shell, name)

    def run_phase(self, phase, arena, beside=None):
        result = self.shell.run_phase(phase, arena, beside=beside)
        if beside is not None and self.armed:
            self.armed = False
            raise HwTrainError("a list was refused at its end")
        return result


class Unconvertible:
    """A next batch NumPy cannot take (as a torch tensor that needs its gradient)."""

    def __array__(self, *args, **kwargs):
        raise RuntimeError("call detach() first")

    def __len__(self) -> int:
        return 20


@pytest.fixture
def fails_after_beside():
    return FailsAfterBeside


@pytest.fixture
def unconvertible():
    return Unconvertible()
