"""A build folder with one accelerator IP per stream PE (csb, tt1, fpmac_array), and its emulated overlay."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from codesign.boards import board
from codesign.design.point import DesignPoint, PeInstance
from codesign.pe import get_pe
from codesign.train.config import config_from_dict

STREAM_PES = ("csb", "tt1", "fpmac_array")


def stream_design() -> DesignPoint:
    instances = tuple(PeInstance(name=f"{name}_0", pe=name, spec=get_pe(name).spec_class(), reason="driver tests")
                      for name in STREAM_PES)
    return DesignPoint(name="stream_pes", training=config_from_dict({}), board=board("zedboard"), clock_mhz=100.0,
                       instances=instances)


def golden_transactions(pe_name: str, spec_fields: dict | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """The PE's default stimulus for its default spec (or ``spec_fields``): (input words, golden output words)."""
    pe = get_pe(pe_name)
    spec = pe.spec_class(**(spec_fields or {}))
    return [(np.asarray(words_in, dtype=np.uint32), np.asarray(words_out, dtype=np.uint32))
            for words_in, words_out in pe.build_stimulus(spec, pe.stimulus_options())]


def emulated_overlay(design, root):
    """``design`` built as an emulation folder under ``root`` (a folder per board) and opened as its emulated
    overlay, the notice that the emulated board stands in for the board silenced."""
    from codesign.deploy import CodesignOverlay
    from codesign.design.build import write_emulation_folder

    folder = write_emulation_folder(design, root / design.board.name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return CodesignOverlay(folder, design=design, emulate=True)


@pytest.fixture(scope="session")
def stream_folder(tmp_path_factory):
    from codesign.design.build import write_emulation_folder

    return write_emulation_folder(stream_design(), tmp_path_factory.mktemp("build") / "zedboard")


@pytest.fixture
def overlay(stream_folder):
    from codesign.deploy import CodesignOverlay

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return CodesignOverlay(stream_folder, emulate=True)
